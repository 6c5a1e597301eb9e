//go:build tools

// Package tools pins kwok (sigs.k8s.io/kwok/cmd/kwok), which the Makefile
// builds into bin/k8s/kwok. A module of its own so that kwok builds with the
// dependency versions its own go.mod was tested with, not with the
// k8s.io/kubernetes replaces of ../go.mod. See ../README.md.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
