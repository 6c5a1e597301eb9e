package bootc

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, that it returns a status or an
// error but not both, and that a status it accepts survives being written
// back as v1 JSON and parsed again.
func FuzzParse(f *testing.F) {
	for _, name := range fixtureFiles(f) {
		data, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"{",
		"[]",
		"null",
		"apiVersion: org.containers.bootc/v1alpha1\nkind: BootcHost\nstatus:\n  booted: {image: {image: {image: a}, imageDigest: b, version: 1.10, timestamp: 2023-09-30T19:22:16Z}}\n",
		`{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{"staged":{"image":{"image":{"image":"a"},"imageDigest":"b","version":-1e400}}}}`,
		"a: &a [*a, *a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Parse(data)
		if err != nil {
			if st != nil {
				t.Fatalf("Parse returned both %s and error %v", formatStatus(st), err)
			}
			return
		}
		if st == nil {
			t.Fatal("Parse returned neither a status nor an error")
		}
		again, err := Parse(encodeV1(t, st))
		if err != nil {
			t.Fatalf("re-parsing %s written as v1 JSON: %v", formatStatus(st), err)
		}
		if d := diffStatus(again, st); d != "" {
			t.Fatalf("round trip through v1 JSON changed the status:\n%s", d)
		}
	})
}
