//go:build tools

// Package tools pins Karpenter's KWOK provider (sigs.k8s.io/karpenter/kwok),
// which the Makefile builds into bin/k8s/karpenter-kwok. A module of its own
// because sigs.k8s.io/karpenter v1.15.0 needs a newer Go than the rest of the
// repository: only this build runs with GOTOOLCHAIN=go1.27.3. See ../README.md.
package tools

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
