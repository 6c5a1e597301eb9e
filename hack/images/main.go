// Command images builds bootroll's container images without Docker and
// without a base image: for each component it cross-compiles a static binary
// per platform, puts it alone in one layer on an empty image, and writes one
// multi-platform OCI image index per component, as an OCI image layout
// directory (what `crane push` reads) and the same layout in a tar (an OCI
// archive, what `skopeo copy oci-archive:` and `ctr images import` read):
//
//	OUT/bootroll-controller/          OUT/bootroll-controller.oci.tar
//	OUT/bootroll-daemon/              OUT/bootroll-daemon.oci.tar
//
// The output depends only on the source: timestamps are fixed
// ($SOURCE_DATE_EPOCH, default 0), binaries are built with -trimpath, and
// the tar lists its files sorted with fixed owners and times. See
// docs/images.md.
//
// Run it from the module root: go run ./hack/images --out bin/images
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Component is one image: a command of this module and the user it runs as.
type Component struct {
	Name string // image and binary name, e.g. bootroll-controller
	Pkg  string // Go package, relative to the module root
	User string // uid:gid
}

// Components are the images `make images` builds.
var Components = []Component{
	// The controller needs no privilege: the "nonroot" uid of distroless.
	{Name: "bootroll-controller", Pkg: "./cmd/bootroll-controller", User: "65532:65532"},
	// The daemon acts on its host (chroot into the host root, bootc,
	// systemctl): it runs as root, in a privileged pod.
	{Name: "bootroll-daemon", Pkg: "./cmd/bootroll-daemon", User: "0:0"},
	// The CLI, for what-if sweeps as a Kubernetes Indexed Job
	// (bootroll whatif --emit-job): it reads its scenario and writes its
	// shard file, nothing else.
	{Name: "bootroll", Pkg: "./cmd/bootroll", User: "65532:65532"},
}

// Platforms are the platforms of every image, in index order.
var Platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Meta is what the images say about their source (OCI annotations and
// labels) and the time they carry.
type Meta struct {
	Source   string    // org.opencontainers.image.source
	Revision string    // org.opencontainers.image.revision, the git commit
	Version  string    // org.opencontainers.image.version and ref.name
	Created  time.Time // every timestamp in the images and archives
}

// Options say what to build and where.
type Options struct {
	ModuleDir string // the module root, where `go build` runs
	Out       string // output directory
	Meta      Meta
	Log       io.Writer
}

// Result is one component's built index.
type Result struct {
	Component Component
	Digest    v1.Hash           // of the image index
	Images    []PlatformedImage // in Platforms order
	Layout    string            // OCI layout directory
	Archive   string            // the layout as a tar
}

// PlatformedImage is one platform's image of an index.
type PlatformedImage struct {
	Platform v1.Platform
	Digest   v1.Hash
	Size     int64 // bytes of manifest, config and layer as stored (the layer gzipped)
}

func main() {
	opts := Options{ModuleDir: ".", Log: os.Stderr}
	flag.StringVar(&opts.Out, "out", "bin/images", "Output directory.")
	flag.StringVar(&opts.Meta.Source, "source", "https://github.com/bootroll/bootroll", "org.opencontainers.image.source of the images.")
	flag.StringVar(&opts.Meta.Version, "version", "", "Version of the images (default: git describe --tags --always --dirty).")
	flag.StringVar(&opts.Meta.Revision, "revision", "", "Git commit of the images (default: git rev-parse HEAD).")
	flag.Parse()
	if err := run(opts); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run(opts Options) error {
	var err error
	if opts.Meta.Created, err = sourceDate(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return err
	}
	if opts.Meta.Version == "" {
		opts.Meta.Version = gitOr(opts.ModuleDir, "unknown", "describe", "--tags", "--always", "--dirty")
	}
	if opts.Meta.Revision == "" {
		opts.Meta.Revision = gitOr(opts.ModuleDir, "unknown", "rev-parse", "HEAD")
	}
	results, err := Build(context.Background(), opts)
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Printf("%s %s %s\n", r.Archive, r.Component.Name, r.Digest)
		for _, im := range r.Images {
			fmt.Printf("  %s/%s %s %d bytes\n", im.Platform.OS, im.Platform.Architecture, im.Digest, im.Size)
		}
	}
	return nil
}

// sourceDate reads $SOURCE_DATE_EPOCH (reproducible-builds.org): seconds
// since 1970, 0 when unset.
func sourceDate(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("$SOURCE_DATE_EPOCH %q: want seconds since 1970", v)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func gitOr(dir, fallback string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return fallback
	}
	return strings.TrimSpace(string(out))
}

// Build builds every component for every platform into opts.Out.
func Build(ctx context.Context, opts Options) ([]Result, error) {
	bins, err := os.MkdirTemp("", "bootroll-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bins)
	var results []Result
	for _, c := range Components {
		binaries := make([]string, len(Platforms))
		for i, p := range Platforms {
			binaries[i] = filepath.Join(bins, c.Name+"-"+p.Architecture)
			if opts.Log != nil {
				fmt.Fprintf(opts.Log, ">> go build %s for %s/%s\n", c.Pkg, p.OS, p.Architecture)
			}
			if err := GoBuild(ctx, opts.ModuleDir, c.Pkg, p, binaries[i]); err != nil {
				return nil, err
			}
		}
		r, err := Assemble(c, binaries, opts.Meta, opts.Out)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

// GoBuild cross-compiles pkg for p into out: static (no cgo), with
// -trimpath so that no path of this machine is in it, stripped of its
// symbol table and DWARF (stack traces keep function names and lines).
func GoBuild(ctx context.Context, moduleDir, pkg string, p v1.Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w\n%s", pkg, p.OS, p.Architecture, err, b)
	}
	return nil
}

// Assemble writes c's image index, one image per platform with the binary
// of the same index in binaries, as OUT/NAME (an OCI layout) and
// OUT/NAME.oci.tar, replacing what was there.
func Assemble(c Component, binaries []string, m Meta, out string) (Result, error) {
	r := Result{Component: c, Layout: filepath.Join(out, c.Name), Archive: filepath.Join(out, c.Name+".oci.tar")}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, p := range Platforms {
		img, err := Image(c, binaries[i], p, m)
		if err != nil {
			return r, err
		}
		im := PlatformedImage{Platform: p}
		if im.Digest, err = img.Digest(); err != nil {
			return r, err
		}
		if im.Size, err = storedSize(img); err != nil {
			return r, err
		}
		r.Images = append(r.Images, im)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &Platforms[i]}})
	}
	idx = mutate.Annotations(idx, annotations(m)).(v1.ImageIndex)
	var err error
	if r.Digest, err = idx.Digest(); err != nil {
		return r, err
	}
	if err := os.RemoveAll(r.Layout); err != nil {
		return r, err
	}
	lp, err := layout.Write(r.Layout, empty.Index)
	if err != nil {
		return r, fmt.Errorf("write OCI layout %s: %w", r.Layout, err)
	}
	// ref.name lets `skopeo copy oci-archive:FILE:VERSION` pick the image.
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": m.Version})); err != nil {
		return r, fmt.Errorf("write OCI layout %s: %w", r.Layout, err)
	}
	if err := TarDir(r.Layout, r.Archive, m.Created); err != nil {
		return r, err
	}
	return r, nil
}

func annotations(m Meta) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":   m.Source,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.created":  m.Created.Format(time.RFC3339),
	}
}

// Image is the image of c for p: one layer holding only the binary at
// /NAME, the entrypoint, run as c.User.
func Image(c Component, binary string, p v1.Platform, m Meta) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: c.Name, Mode: 0o755, Size: int64(len(data)),
		ModTime: m.Created, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: m.Created}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "go build -trimpath " + c.Pkg + " (hack/images)", Comment: "bootroll " + m.Version},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = created
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + c.Name},
		User:       c.User,
		WorkingDir: "/",
		Labels:     annotations(m),
	}
	return mutate.ConfigFile(img, cf)
}

// storedSize is what a registry stores for img: manifest, config and layers.
func storedSize(img v1.Image) (int64, error) {
	mf, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + mf.Config.Size
	for _, l := range mf.Layers {
		n += l.Size
	}
	return n, nil
}

// TarDir writes the files under dir to a tar at file, sorted by path,
// owned by 0:0 and dated t, so that the same layout gives the same bytes.
func TarDir(dir, file string, t time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = func() error {
		for _, p := range paths {
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: t, Format: tar.FormatPAX}
			switch {
			case fi.IsDir():
				hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			case fi.Mode().IsRegular():
				hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, fi.Size()
			default:
				return fmt.Errorf("%s: not a file or directory", p)
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if hdr.Typeflag == tar.TypeReg {
				src, err := os.Open(p)
				if err != nil {
					return err
				}
				_, err = io.Copy(tw, src)
				src.Close()
				if err != nil {
					return err
				}
			}
		}
		return tw.Close()
	}()
	return errors.Join(err, f.Close())
}
