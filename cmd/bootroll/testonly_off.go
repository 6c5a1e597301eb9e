//go:build !bootroll_testonly

package main

import (
	"io"

	"github.com/spf13/cobra"
)

// addTestOnlyCommands adds nothing: the default build has no deliberately
// broken modes (docs/testonly-build.md).
func addTestOnlyCommands(*cobra.Command, io.Writer, io.Writer) {}
