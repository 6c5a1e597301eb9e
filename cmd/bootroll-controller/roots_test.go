package main

import (
	"testing"

	"github.com/bootroll/bootroll/internal/roottest"
)

// TestFallbackRoots: the binary trusts the public root CAs on a host with
// none, as in its image; it fails without the fallback import (roots.go).
func TestFallbackRoots(t *testing.T) { roottest.Check(t, "TestFallbackRoots") }
