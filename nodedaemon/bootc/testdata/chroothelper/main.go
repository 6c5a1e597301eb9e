// Command chroothelper is run by TestChrootRunner inside a fake host root:
// it prints what it sees so the test can tell it ran chrooted.
package main

import (
	"fmt"
	"os"
)

func main() {
	marker, err := os.ReadFile("/marker") // only in the fake root
	if err != nil {
		fmt.Fprintln(os.Stderr, "no marker:", err)
		os.Exit(4)
	}
	wd, _ := os.Getwd()
	fmt.Printf("marker=%s wd=%s path=%s args=%q", marker, wd, os.Getenv("PATH"), os.Args[1:])
	if len(os.Args) > 1 && os.Args[1] == "fail" {
		fmt.Fprintln(os.Stderr, "error: asked to fail")
		os.Exit(3)
	}
}
