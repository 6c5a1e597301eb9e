package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func kinds(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind()+"/"+o.GetName())
	}
	return ks
}

func TestRepoManifests(t *testing.T) {
	crds, err := ReadManifests(Manifests, KarpenterCRDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "kwoknodeclasses.karpenter.kwok.sh"} {
		if !slices.Contains(kinds(crds), "CustomResourceDefinition/"+w) {
			t.Errorf("Karpenter CRDs %v: no %s", kinds(crds), w)
		}
	}
	own, err := ReadManifests(os.DirFS(repoRoot(t)), BootrollCRDDir+"/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kinds(own), "CustomResourceDefinition/bootcnodepools.bootroll.dev") {
		t.Errorf("bootroll's CRDs %v: no bootcnodepools.bootroll.dev", kinds(own))
	}
	pool, err := ReadManifests(Manifests, NodePoolFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(pool), []string{"KWOKNodeClass/default", "NodePool/default"}; !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", NodePoolFile, got, want)
	}

	stages, err := ReadManifests(Manifests, StagesFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Stage/node-initialize", "Stage/node-heartbeat-with-lease", "Stage/node-rebooting", "Stage/pod-ready", "Stage/pod-complete", "Stage/pod-delete"}
	if got := kinds(stages); !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", StagesFile, got, want)
	}
	// node-rebooting selects the annotation; the stages that make a node
	// Ready must skip a rebooting node, or they undo it at once.
	key := `.metadata.annotations["` + RebootingAnnotation + `"]`
	for _, s := range stages {
		exprs, _, _ := unstructured.NestedSlice(s.Object, "spec", "selector", "matchExpressions")
		op := ""
		for _, e := range exprs {
			if m := e.(map[string]any); m["key"] == key {
				op = m["operator"].(string)
			}
		}
		wantOp := map[string]string{"node-rebooting": "In", "node-initialize": "NotIn", "node-heartbeat-with-lease": "NotIn"}[s.GetName()]
		if op != wantOp {
			t.Errorf("stage %s: operator on %s %q, want %q", s.GetName(), key, op, wantOp)
		}
	}
}

func TestReadManifestsErrors(t *testing.T) {
	dir := t.TempDir()
	fsys := os.DirFS(dir)
	for name, body := range map[string]string{
		"no-name": "apiVersion: v1\nkind: ConfigMap\n",
		"bad":     "kind: [\n",
	} {
		writeFile(t, filepath.Join(dir, name+".yaml"), body)
		if _, err := ReadManifests(fsys, name+".yaml"); err == nil || !strings.Contains(err.Error(), name+".yaml") {
			t.Errorf("%s: error %v, want one naming %s.yaml", name, err, name)
		}
	}
	if _, err := ReadManifests(fsys, "none/*.yaml"); err == nil {
		t.Errorf("a pattern that matches nothing: no error")
	}
	writeFile(t, filepath.Join(dir, "two.yaml"), "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	objs, err := ReadManifests(fsys, "two.yaml")
	if err != nil || len(objs) != 2 {
		t.Errorf("two documents and empty ones: %v, %v; want 2 objects", kinds(objs), err)
	}
}

func TestKubeconfigBytes(t *testing.T) {
	b, err := KubeconfigBytes("https://127.0.0.1:2003", []byte("CA"), []byte("CERT"), []byte("KEY"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		t.Fatalf("no current context in %s", b)
	}
	cl, ai := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cl == nil || ai == nil || cl.Server != "https://127.0.0.1:2003" || string(cl.CertificateAuthorityData) != "CA" ||
		string(ai.ClientCertificateData) != "CERT" || string(ai.ClientKeyData) != "KEY" {
		t.Errorf("kubeconfig %s: want server, CA, certificate and key", b)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
