// Command retag copies an OCI archive of `make images` (bin/images/*.oci.tar)
// and names its image with a full reference, for `kind load image-archive`.
//
// kind imports an archive with `ctr images import`, which names an OCI
// image after its org.opencontainers.image.ref.name annotation; hack/images
// writes the version there (a tag alone, for `skopeo copy
// oci-archive:FILE:VERSION`), which ctr turns into "import-DATE:VERSION", the
// same name for every component. The copy carries the full name in that
// annotation and in io.containerd.image.name (which ctr reads first), so
// the image lands in the node's containerd under the name the kind overlay
// uses. Only index.json changes; the blobs, and so the image digests, are
// the same bytes.
//
//	go run ./kind/retag --in bin/images/bootroll-daemon.oci.tar \
//	  --out bin/kind/bootroll-daemon.oci.tar --name kind.local/bootroll/bootroll-daemon:dev
package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Annotations that name an image in an OCI index.
const (
	refName         = "org.opencontainers.image.ref.name"
	containerdImage = "io.containerd.image.name"
)

func main() {
	in := flag.String("in", "", "OCI archive to read.")
	out := flag.String("out", "", "OCI archive to write.")
	name := flag.String("name", "", "Full image reference to name the image with, e.g. kind.local/bootroll/bootroll-daemon:dev.")
	flag.Parse()
	if *in == "" || *out == "" || *name == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: retag --in ARCHIVE --out ARCHIVE --name REFERENCE")
		os.Exit(2)
	}
	if err := retagFile(*in, *out, *name); err != nil {
		fmt.Fprintf(os.Stderr, "retag: %v\n", err)
		os.Exit(1)
	}
}

func retagFile(in, out, name string) error {
	r, err := os.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := retag(r, w, name); err != nil {
		w.Close()
		os.Remove(out)
		return fmt.Errorf("%s: %w", in, err)
	}
	return w.Close()
}

// retag copies the OCI archive r to w with the image named name.
func retag(r io.Reader, w io.Writer, name string) error {
	// A full reference: a tag alone would be prefixed by ctr again.
	if !strings.ContainsAny(name, "/:@") {
		return fmt.Errorf("name %q is not a full image reference (registry/repository:tag)", name)
	}
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if path.Clean(h.Name) != "index.json" {
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
			continue
		}
		found = true
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if data, err = renameIndex(data, name); err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if !found {
		return errors.New("no index.json: not an OCI archive")
	}
	return tw.Close()
}

// renameIndex sets the name annotations of the one image of an OCI
// index.json, keeping every other field as it is.
func renameIndex(data []byte, name string) ([]byte, error) {
	var idx map[string]any
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	ms, _ := idx["manifests"].([]any)
	if len(ms) != 1 {
		return nil, fmt.Errorf("index.json lists %d images, want the one image of a `make images` archive", len(ms))
	}
	m, ok := ms[0].(map[string]any)
	if !ok {
		return nil, errors.New("index.json: manifests[0] is not an object")
	}
	ann, _ := m["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[refName] = name
	ann[containerdImage] = name
	m["annotations"] = ann
	return json.Marshal(idx)
}
