package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// archive writes an OCI layout holding one image named by ref.name tag, as
// hack/images does, and returns it as a tar.
func archive(t *testing.T, tag string) []byte {
	t.Helper()
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(empty.Image, layout.WithAnnotations(map[string]string{refName: tag})); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// files returns the entries of a tar by name.
func files(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

// TestRetag: the copy names its one image with the full reference in both
// annotations that ctr reads, keeps the image's digest and every blob, and
// is still an OCI layout.
func TestRetag(t *testing.T) {
	in := archive(t, "v0.1.0")
	var out bytes.Buffer
	const name = "kind.local/bootroll/bootroll-daemon:dev"
	if err := retag(bytes.NewReader(in), &out, name); err != nil {
		t.Fatal(err)
	}
	before, after := files(t, in), files(t, out.Bytes())
	if len(before) != len(after) {
		t.Fatalf("%d files in, %d out", len(before), len(after))
	}
	for n, b := range before {
		if n != "index.json" && !bytes.Equal(b, after[n]) {
			t.Errorf("%s changed", n)
		}
	}
	dir := t.TempDir()
	for n, b := range after {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lp, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the copy is not an OCI layout: %v", err)
	}
	m, err := lp.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	orig := files(t, in)["index.json"]
	if len(m.Manifests) != 1 || !bytes.Contains(orig, []byte(m.Manifests[0].Digest.String())) {
		t.Fatalf("index.json of the copy = %+v, want the original's one image (%s)", m.Manifests, orig)
	}
	for _, a := range []string{refName, containerdImage} {
		if got := m.Manifests[0].Annotations[a]; got != name {
			t.Errorf("annotation %s = %q, want %q", a, got, name)
		}
	}
}

func TestRetagRefuses(t *testing.T) {
	var out bytes.Buffer
	if err := retag(bytes.NewReader(archive(t, "v1")), &out, "dev"); err == nil || !strings.Contains(err.Error(), "full image reference") {
		t.Errorf("a tag alone as the name: error %v", err)
	}
	var empty bytes.Buffer
	tw := tar.NewWriter(&empty)
	tw.Close()
	if err := retag(&empty, &out, "kind.local/x:dev"); err == nil || !strings.Contains(err.Error(), "index.json") {
		t.Errorf("an archive without index.json: error %v", err)
	}
}
