package apiserver_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

func TestPatch(t *testing.T) {
	tests := []struct {
		name  string
		patch func(c client.Client, p *corev1.Pod) error
		want  []string // container names after the patch
		check func(error) bool
	}{{
		name: "merge patch replaces lists",
		patch: func(c client.Client, p *corev1.Pod) error {
			return c.Patch(ctx, p, client.RawPatch(types.MergePatchType,
				[]byte(`{"spec":{"containers":[{"name":"side","image":"x"}]}}`)))
		},
		want: []string{"side"},
	}, {
		name: "strategic merge patch merges by key",
		patch: func(c client.Client, p *corev1.Pod) error {
			return c.Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType,
				[]byte(`{"spec":{"containers":[{"name":"side","image":"x"}]}}`)))
		},
		want: []string{"side", "main"},
	}, {
		name: "StrategicMergeFrom",
		patch: func(c client.Client, p *corev1.Pod) error {
			base := p.DeepCopy()
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "x"})
			return c.Patch(ctx, p, client.StrategicMergeFrom(base))
		},
		want: []string{"main", "side"},
	}, {
		name: "JSON patch",
		patch: func(c client.Client, p *corev1.Pod) error {
			return c.Patch(ctx, p, client.RawPatch(types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/spec/containers/-","value":{"name":"side","image":"x"}}]`)))
		},
		want: []string{"main", "side"},
	}, {
		name: "MergeFrom without lock ignores a stale object",
		patch: func(c client.Client, p *corev1.Pod) error {
			p.ResourceVersion = "1" // the pod was updated since
			base := p.DeepCopy()
			p.Spec.Containers[0].Name = "renamed"
			return c.Patch(ctx, p, client.MergeFrom(base))
		},
		want: []string{"renamed"},
	}, {
		name: "optimistic lock on a stale object conflicts",
		patch: func(c client.Client, p *corev1.Pod) error {
			p.ResourceVersion = "1" // the pod was updated since
			base := p.DeepCopy()
			p.Spec.Containers[0].Name = "renamed"
			return c.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		},
		want:  []string{"main"},
		check: apierrors.IsConflict,
	}, {
		name: "optimistic lock on a fresh object",
		patch: func(c client.Client, p *corev1.Pod) error {
			base := p.DeepCopy()
			p.Spec.Containers[0].Name = "renamed"
			return c.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		},
		want: []string{"renamed"},
	}, {
		name: "server-side apply is refused",
		patch: func(c client.Client, p *corev1.Pod) error {
			return c.Patch(ctx, p, client.Apply) //nolint:staticcheck // testing the refusal.
		},
		want:  []string{"main"},
		check: func(err error) bool { return errors.Is(err, apiserver.ErrApplyNotSupported) },
	}, {
		name: "patch of a missing object",
		patch: func(c client.Client, p *corev1.Pod) error {
			return c.Patch(ctx, pod("ns", "missing", ""), client.RawPatch(types.MergePatchType, []byte(`{}`)))
		},
		want:  []string{"main"},
		check: apierrors.IsNotFound,
	}, {
		name: "a patch cannot rename",
		patch: func(c client.Client, p *corev1.Pod) error {
			return c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"name":"other"}}`)))
		},
		want:  []string{"main"},
		check: apierrors.IsBadRequest,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			c := s.Client()
			p := pod("ns", "p", "")
			mustCreate(t, c, p)
			p.Labels = map[string]string{"v": "2"}
			if err := c.Update(ctx, p); err != nil { // resourceVersion 2
				t.Fatal(err)
			}
			err := tt.patch(c, p)
			if tt.check != nil {
				if !tt.check(err) {
					t.Errorf("Patch error = %v", err)
				}
			} else if err != nil {
				t.Fatalf("Patch: %v", err)
			}
			got := get(t, c, pod("ns", "p", ""))
			var names []string
			for _, ctr := range got.Spec.Containers {
				names = append(names, ctr.Name)
			}
			if !equalStrings(names, tt.want) {
				t.Errorf("containers = %v, want %v", names, tt.want)
			}
			if tt.check == nil && (p.ResourceVersion != got.ResourceVersion || got.Generation != 2) {
				t.Errorf("after Patch: object rv %s, stored rv %s generation %d; want equal rvs and generation 2",
					p.ResourceVersion, got.ResourceVersion, got.Generation)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
