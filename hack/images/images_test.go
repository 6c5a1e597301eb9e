package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The machine each platform's binary must be built for.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

var testMeta = Meta{
	Source:   "https://example.invalid/bootroll",
	Revision: "0123456789abcdef0123456789abcdef01234567",
	Version:  "v0.0.0-test",
	Created:  time.Unix(0, 0).UTC(),
}

// TestImages builds the images as `make images` does (four cross-compiles:
// about a minute with a warm build cache) and opens the archives.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds six binaries")
	}
	out := t.TempDir()
	results, err := Build(context.Background(), Options{ModuleDir: filepath.Join("..", ".."), Out: out, Meta: testMeta})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	wantUser := map[string]string{"bootroll-controller": "65532:65532", "bootroll-daemon": "0:0", "bootroll": "65532:65532"}
	for _, r := range results {
		t.Run(r.Component.Name, func(t *testing.T) {
			if r.Archive != filepath.Join(out, r.Component.Name+".oci.tar") {
				t.Errorf("archive at %s", r.Archive)
			}
			idx := openArchive(t, r.Archive)
			checkIndex(t, idx, r, wantUser[r.Component.Name])
			// The layout directory is the same index (what `crane push` reads).
			lp, err := layout.ImageIndexFromPath(r.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if d := onlyIndex(t, lp); d != r.Digest {
				t.Errorf("layout directory holds index %s, archive %s", d, r.Digest)
			}
			checkDeterministic(t, r)
			checkPush(t, lp, r.Digest)
		})
	}
}

// openArchive untars an OCI archive and opens its layout.
func openArchive(t *testing.T, file string) v1.ImageIndex {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lp, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("%s is not an OCI layout in a tar: %v", file, err)
	}
	return lp
}

// onlyIndex returns the digest of the one entry of a layout's index.json,
// which must be an image index.
func onlyIndex(t *testing.T, lp v1.ImageIndex) v1.Hash {
	t.Helper()
	m, err := lp.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json = %+v, want one OCI image index", m.Manifests)
	}
	return m.Manifests[0].Digest
}

func checkIndex(t *testing.T, lp v1.ImageIndex, r Result, wantUser string) {
	t.Helper()
	d := onlyIndex(t, lp)
	if d != r.Digest {
		t.Errorf("archive holds index %s, Build said %s", d, r.Digest)
	}
	idx, err := lp.ImageIndex(d)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Annotations["org.opencontainers.image.revision"]; got != testMeta.Revision {
		t.Errorf("index revision annotation = %q, want %q", got, testMeta.Revision)
	}
	var platforms []string
	for _, desc := range im.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		p := *desc.Platform
		platforms = append(platforms, p.OS+"/"+p.Architecture)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, r.Component, p, wantUser)
	}
	if got, want := strings.Join(platforms, " "), "linux/amd64 linux/arm64"; got != want {
		t.Errorf("index platforms = %s, want %s", got, want)
	}
}

func checkImage(t *testing.T, img v1.Image, c Component, p v1.Platform, wantUser string) {
	t.Helper()
	at := p.OS + "/" + p.Architecture
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s", at, mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", at, cf.OS, cf.Architecture)
	}
	entry := "/" + c.Name
	if got := strings.Join(cf.Config.Entrypoint, " "); got != entry || len(cf.Config.Cmd) != 0 {
		t.Errorf("%s: entrypoint %q cmd %q, want %q", at, cf.Config.Entrypoint, cf.Config.Cmd, entry)
	}
	if cf.Config.User != wantUser {
		t.Errorf("%s: user %q, want %q", at, cf.Config.User, wantUser)
	}
	for _, k := range []string{"org.opencontainers.image.source", "org.opencontainers.image.revision", "org.opencontainers.image.version"} {
		if cf.Config.Labels[k] == "" {
			t.Errorf("%s: no label %s", at, k)
		}
	}
	if !cf.Created.Time.Equal(testMeta.Created) {
		t.Errorf("%s: created %v, want %v", at, cf.Created, testMeta.Created)
	}
	// The filesystem: the binary at the entrypoint and nothing else.
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fmt.Sprintf("%s %o", "/"+strings.TrimPrefix(hdr.Name, "/"), hdr.Mode))
		if "/"+strings.TrimPrefix(hdr.Name, "/") != entry {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s: %s is not an ELF file: %v", at, entry, err)
			continue
		}
		if f.Machine != machines[p.Architecture] {
			t.Errorf("%s: %s is built for %v, want %v", at, entry, f.Machine, machines[p.Architecture])
		}
		if f.Type != elf.ET_EXEC || f.Section(".interp") != nil {
			t.Errorf("%s: %s is not a static executable (type %v)", at, entry, f.Type)
		}
	}
	if got, want := strings.Join(files, ", "), entry+" 755"; got != want {
		t.Errorf("%s: files %s, want only %s", at, got, want)
	}
}

// checkDeterministic assembles the index again from the same binaries
// (extracted from the first) and wants the same bytes.
func checkDeterministic(t *testing.T, r Result) {
	t.Helper()
	lp, err := layout.ImageIndexFromPath(r.Layout)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex(r.Digest)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var bins []string
	for _, p := range Platforms {
		imgs, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, desc := range imgs.Manifests {
			if desc.Platform.Architecture != p.Architecture {
				continue
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(mutate.Extract(img))
			if _, err := tr.Next(); err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, p.Architecture)
			if err := os.WriteFile(bin, data, 0o755); err != nil {
				t.Fatal(err)
			}
			bins = append(bins, bin)
		}
	}
	again, err := Assemble(r.Component, bins, testMeta, filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != r.Digest {
		t.Errorf("assembled again from the same binaries: index %s, first %s", again.Digest, r.Digest)
	}
	a, err := os.ReadFile(r.Archive)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(again.Archive)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("assembled again from the same binaries: %s differs from %s", again.Archive, r.Archive)
	}
}

// checkPush pushes the layout's index to an in-process registry as `crane
// push DIR REF` does and reads it back.
func checkPush(t *testing.T, lp v1.ImageIndex, want v1.Hash) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/bootroll/test:v1")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("pulled index %s, pushed %s", d, want)
	}
}

func TestSourceDate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  bool
	}{{"", 0, false}, {"1700000000", 1700000000, false}, {"yesterday", 0, true}} {
		got, err := sourceDate(tt.in)
		if (err != nil) != tt.err || (!tt.err && got.Unix() != tt.want) {
			t.Errorf("sourceDate(%q) = %v, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
