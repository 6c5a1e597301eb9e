//go:build tools

// Package tools pins Karpenter's KWOK provider at v1.14.3, which the
// Makefile builds into bin/k8s/karpenter-kwok-v1.14 for scenarios that set
// karpenter.version=v1.14 (the twin's v1.14 profile, checked against the
// real v1.14 on the cluster target). A module of its own, built with
// GOTOOLCHAIN=go1.27.3 like ../karpenter (v1.14.3 says go 1.26.10). See
// ../README.md.
package tools

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
