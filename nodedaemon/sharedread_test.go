package nodedaemon

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// sharingCache is a client whose Get of the BootcNode with
// client.UnsafeDisableDeepCopy hands out the fields of one object it holds,
// its maps, slices and pointers shared, as a controller-runtime cache does;
// load refreshes that object from the server, as a watch event would.
type sharingCache struct {
	client.Client
	held   *v1alpha1.BootcNode
	shared int
}

func (c *sharingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var o client.GetOptions
	o.ApplyOptions(opts)
	if bn, ok := obj.(*v1alpha1.BootcNode); ok && o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
		c.shared++
		*bn = *c.held
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// Status decodes each patch's answer into the object given, as client-go
// does (encoding/json reuses the maps and slices it finds there), where
// the fake client zeroes the object first.
func (c *sharingCache) Status() client.SubResourceWriter { return decodingWriter{c.Client.Status()} }

type decodingWriter struct{ client.SubResourceWriter }

func (w decodingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	answer := obj.DeepCopyObject().(client.Object)
	if err := w.SubResourceWriter.Patch(ctx, answer, patch, opts...); err != nil {
		return err
	}
	data, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, obj)
}

func (c *sharingCache) load(t *testing.T) {
	t.Helper()
	var bn v1alpha1.BootcNode
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: node}, &bn); err != nil {
		t.Fatal(err)
	}
	c.held = &bn
}

// progressPrefetcher reports a new progress on every pass, so that each
// pass writes it.
type progressPrefetcher struct{ n int }

func (p *progressPrefetcher) Sync(_ context.Context, _ time.Time, _ []v1alpha1.NodePinnedImageSet, _ []v1alpha1.PinnedSetProgress, _ prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	p.n++
	return []v1alpha1.PinnedSetProgress{{Name: "set", Generation: 2, Images: []v1alpha1.PinnedImageProgress{{Image: fmt.Sprintf("img-%d", p.n), State: v1alpha1.PinnedPending}}}}, 0, nil
}

// TestDaemonNeverModifiesWhatItReadsShared: the daemon reads its BootcNode
// without a deep copy, so nothing a pass does (status reports, pinned
// progress and condition writes, whose answers are decoded) may change
// the object the cache holds.
func TestDaemonNeverModifiesWhatItReadsShared(t *testing.T) {
	h := newHarness(t, v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA})
	c := &sharingCache{Client: h.client}
	host := &fakeHost{t: t, obs: onOld()}
	d := New(node, c, host, h.clock, logr.Discard())
	d.Prefetch = &progressPrefetcher{}
	pass := func(what string) {
		t.Helper()
		c.load(t)
		before := c.held.DeepCopy()
		n := h.patchCount()
		h.reconcile(d)
		if h.patchCount() == n {
			t.Errorf("%s: no write; the test wants passes that write", what)
		}
		if !equality.Semantic.DeepEqual(before, c.held) {
			t.Errorf("%s: the pass changed the cached object:\nbefore %+v\nafter  %+v", what, before, c.held)
		}
	}
	pass("stage")
	host.finishStage("")
	h.clock.Step(10 * time.Second)
	pass("staged")
	h.setSpec(func(s *v1alpha1.BootcNodeSpec) { s.BootOrder = order(imgA) })
	h.clock.Step(10 * time.Second)
	pass("reboot")
	if c.shared == 0 {
		t.Errorf("the daemon never read its BootcNode with UnsafeDisableDeepCopy")
	}
	if got := h.phase(); got == "" {
		t.Errorf("no phase reported")
	}
}
