package localcluster

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Manifests are the files Up installs that belong to the local cluster,
// not to bootroll: Karpenter's CRDs (manifests/crds), the KWOK stages and
// the KWOKNodeClass and default NodePool. They are compiled into the
// binary. (Not under config/: that directory is bootroll's own install,
// which config's tests check as such.)
//
//go:embed manifests/crds/*.yaml manifests/crds-v1.14/*.yaml manifests/*.yaml
var Manifests embed.FS

// Paths in Manifests, and of bootroll's own CRDs in the repository.
const (
	KarpenterCRDs  = "manifests/crds/*.yaml"
	StagesFile     = "manifests/kwok-stages.yaml"
	NodePoolFile   = "manifests/nodepool.yaml"
	BootrollCRDDir = "config/crd/bases"
)

// Karpenter versions a local cluster runs: DefaultKarpenterVersion
// (v1.15.0, built by make cluster-tools) and KarpenterV114 (v1.14.3,
// make karpenter-v1.14), each with its own CRDs and karpenter-kwok binary.
const (
	DefaultKarpenterVersion = "v1.15"
	KarpenterV114           = "v1.14"
)

// karpenterFiles are a Karpenter version's CRDs (a glob in Manifests) and
// karpenter-kwok binary (a name in the binary directory).
type karpenterFiles struct{ crds, bin string }

func karpenterVersion(version string) (karpenterFiles, error) {
	switch version {
	case "", DefaultKarpenterVersion:
		return karpenterFiles{KarpenterCRDs, KarpenterKWOK}, nil
	case KarpenterV114:
		return karpenterFiles{"manifests/crds-v1.14/*.yaml", KarpenterKWOK + "-v1.14"}, nil
	}
	return karpenterFiles{}, fmt.Errorf("Karpenter %q: the local cluster runs %s (make cluster-tools) or %s (make karpenter-v1.14)", version, DefaultKarpenterVersion, KarpenterV114)
}

// CheckKarpenterVersion returns an error that names the versions a local
// cluster runs when version is not one of them.
func CheckKarpenterVersion(version string) error {
	_, err := karpenterVersion(version)
	return err
}

// KarpenterCRDsFor are the CRDs of a Karpenter version ("" is
// DefaultKarpenterVersion).
func KarpenterCRDsFor(version string) ([]*unstructured.Unstructured, error) {
	f, err := karpenterVersion(version)
	if err != nil {
		return nil, err
	}
	return ReadManifests(Manifests, f.crds)
}

// FindRepo returns the first of dir and its parents that holds bootroll's
// CRDs (config/crd/bases), so `bootroll cluster up` works from any
// directory of a checkout.
func FindRepo(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, BootrollCRDDir)); err == nil && st.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s in %s or its parents: run from a bootroll checkout or pass --repo", BootrollCRDDir, abs)
		}
	}
}

// ReadManifests decodes every object of the files that match the glob
// patterns in fsys (one or more YAML documents each), pattern by pattern
// and sorted by name within one, skipping empty documents. A pattern that
// matches nothing is an error.
func ReadManifests(fsys fs.FS, patterns ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, pat := range patterns {
		files, err := fs.Glob(fsys, pat)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no manifests match %s", pat)
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := fs.ReadFile(fsys, f)
			if err != nil {
				return nil, fmt.Errorf("reading manifests: %w", err)
			}
			o, err := DecodeManifests(f, b)
			if err != nil {
				return nil, err
			}
			objs = append(objs, o...)
		}
	}
	return objs, nil
}

// DecodeManifests decodes the YAML documents of b, which came from the
// file name (for errors).
func DecodeManifests(name string, b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for i := 0; ; i++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: document %d: want kind and metadata.name", name, i)
		}
		objs = append(objs, u)
	}
}

// createAll creates each object, leaving those that exist alone. An
// object whose kind the API server does not serve yet (a CRD just
// established, not yet in discovery) is retried until ctx ends.
func createAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		for {
			err := c.Create(ctx, o.DeepCopy())
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
				return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("creating %s %s: %w (last error: %v)", o.GetKind(), o.GetName(), ctx.Err(), err)
			case <-time.After(200 * time.Millisecond): // edge: waiting for discovery
			}
		}
	}
	return nil
}

// waitEstablished waits until every CRD in crds has the condition
// Established=True.
func waitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	for _, crd := range crds {
		for {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(crd.GroupVersionKind())
			err := c.Get(ctx, types.NamespacedName{Name: crd.GetName()}, got)
			if err == nil && established(got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for CRD %s to be established: %w (last error: %v)", crd.GetName(), ctx.Err(), err)
			case <-time.After(100 * time.Millisecond): // edge: polling the API server
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
