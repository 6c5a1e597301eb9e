package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

// Repository paths that Up reads, relative to the repository root.
const (
	KarpenterCRDDir = "config/karpenter/crds"
	BootrollCRDDir  = "config/crd/bases"
	StagesFile      = "config/karpenter/kwok-stages.yaml"
	NodePoolFile    = "config/karpenter/nodepool.yaml"
)

// FindRepo returns the first of dir and its parents that holds the
// manifests Up installs, so `bootroll cluster up` works from any
// directory of a checkout.
func FindRepo(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, StagesFile)); err == nil && !st.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s in %s or its parents: run from a bootroll checkout or pass --repo", StagesFile, abs)
		}
	}
}

// ReadManifests decodes every object of the YAML files (one or more
// documents each) in the order given, skipping empty documents.
func ReadManifests(files ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading manifests: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for i := 0; ; i++ {
			var m map[string]any
			err := dec.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", f, i, err)
			}
			if len(m) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: m}
			if u.GetKind() == "" || u.GetName() == "" {
				return nil, fmt.Errorf("%s: document %d: want kind and metadata.name", f, i)
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// YAMLFiles lists dir/*.yaml, sorted.
func YAMLFiles(dir string) ([]string, error) {
	fs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, fmt.Errorf("no *.yaml in %s", dir)
	}
	sort.Strings(fs)
	return fs, nil
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
