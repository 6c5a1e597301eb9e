package informer_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/informer"
)

var (
	ctx   = context.Background()
	start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
)

// world is an engine, an API server and one cache of Nodes and Pods in
// front of it, with the events its handler saw.
type world struct {
	eng    *engine.Engine
	api    *apiserver.Server
	cache  *informer.Cache
	client client.Client
	seen   []string
}

type opts struct {
	delays []time.Duration // delivery delays, in turn; the last repeats
	fault  func(kind string) informer.WatchFault
	only   *client.ObjectKey
	// transform is the cache's Options.Transform.
	transform func(client.Object) client.Object
}

func newWorld(t *testing.T, o opts) *world {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	w := &world{eng: engine.New(start, 1)}
	w.api = apiserver.New(scheme, w.eng.Clock())
	w.api.Subscribe(func(ev apiserver.Event) {
		if w.cache != nil {
			w.cache.Observe(ev)
		}
	})
	store := apiserver.NewMirror(scheme, w.eng.Clock())
	i := 0
	c, err := informer.New(informer.Options{
		Name: "test", Engine: w.eng, Source: w.api, Store: store,
		Kinds: []client.Object{&corev1.Node{}, &corev1.Pod{}},
		Only:  o.only,
		Delay: func() time.Duration {
			if len(o.delays) == 0 {
				return 0
			}
			d := o.delays[min(i, len(o.delays)-1)]
			i++
			return d
		},
		Fault:     o.fault,
		Transform: o.transform,
		Handle: func(ev apiserver.Event) {
			old := "-"
			if ev.Old != nil {
				old = ev.Old.GetResourceVersion()
			}
			w.seen = append(w.seen, fmt.Sprintf("%s %s rv=%s old=%s", ev.Type, ev.Object.GetName(), ev.Object.GetResourceVersion(), old))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.cache = c
	w.client = informer.NewClient(c, w.api.Client())
	return w
}

func (w *world) run(d time.Duration) { w.eng.RunUntil(w.eng.Now().Add(d)) }

func labelOf(t *testing.T, c client.Reader, name string) string {
	t.Helper()
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return "<none>"
		}
		t.Fatal(err)
	}
	return n.Labels["v"]
}

func setLabel(t *testing.T, c client.Client, name, v string) {
	t.Helper()
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"v": v}
	if err := c.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
}

func mkNode(name, v string) *corev1.Node {
	n := &corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{"v": v}
	return n
}

func TestOwnWritesInvisibleUntilTheirEventArrives(t *testing.T) {
	w := newWorld(t, opts{delays: []time.Duration{10 * time.Millisecond}})
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Create(ctx, mkNode("n", "1")); err != nil {
		t.Fatal(err)
	}
	if got := labelOf(t, w.client, "n"); got != "<none>" {
		t.Fatalf("cached read right after the create: got label %q, want not found", got)
	}
	// The uncached reader (a manager's APIReader) sees the store.
	if got := labelOf(t, w.api.Client(), "n"); got != "1" {
		t.Fatalf("uncached read: got %q, want 1", got)
	}
	var list corev1.NodeList
	if err := w.client.List(ctx, &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("cached list right after the create: %d items, err %v; want none", len(list.Items), err)
	}
	if len(w.seen) != 0 {
		t.Fatalf("handler ran at write time: %q", w.seen)
	}
	w.run(9 * time.Millisecond)
	if got := labelOf(t, w.client, "n"); got != "<none>" {
		t.Fatalf("cached read 9ms after: %q, want not found yet", got)
	}
	w.run(time.Millisecond)
	if got := labelOf(t, w.client, "n"); got != "1" {
		t.Fatalf("cached read 10ms after: %q, want 1", got)
	}
	if err := w.client.List(ctx, &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("cached list: %d items, err %v; want 1", len(list.Items), err)
	}
	want := []string{"ADDED n rv=1 old=-"}
	if fmt.Sprint(w.seen) != fmt.Sprint(want) {
		t.Errorf("handled %q, want %q", w.seen, want)
	}
}

func TestDeliveryKeepsOrderPerKind(t *testing.T) {
	// The first event is slow, the later ones fast: per-kind order holds
	// them behind it, and the Pod event (another kind) is not held.
	w := newWorld(t, opts{delays: []time.Duration{0, time.Second, time.Millisecond}})
	w.api.AdminClient().Create(ctx, mkNode("n", "0"))
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	c := w.api.AdminClient()
	setLabel(t, c, "n", "1") // delay 0
	setLabel(t, c, "n", "2") // delay 1s
	setLabel(t, c, "n", "3") // delay 1ms, after the 1s one
	p := &corev1.Pod{}
	p.Name, p.Namespace = "p", "default"
	if err := c.Create(ctx, p); err != nil { // delay 1ms, another kind
		t.Fatal(err)
	}
	w.run(10 * time.Millisecond)
	if got := labelOf(t, w.client, "n"); got != "1" {
		t.Fatalf("after 10ms: label %q, want 1 (2 and 3 wait behind the slow event)", got)
	}
	var pod corev1.Pod
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(p), &pod); err != nil {
		t.Fatalf("the Pod event was held by the Node stream: %v", err)
	}
	w.run(time.Second)
	if got := labelOf(t, w.client, "n"); got != "3" {
		t.Fatalf("after 1s: label %q, want 3", got)
	}
	want := []string{"ADDED n rv=1 old=-", "MODIFIED n rv=2 old=1", "ADDED p rv=5 old=-", "MODIFIED n rv=3 old=2", "MODIFIED n rv=4 old=3"}
	if fmt.Sprint(w.seen) != fmt.Sprint(want) {
		t.Errorf("handled\n%q\nwant\n%q", w.seen, want)
	}
}

func TestDroppedEventBreaksTheWatchUntilARelist(t *testing.T) {
	drops := 1
	w := newWorld(t, opts{fault: func(kind string) informer.WatchFault {
		if kind == "Node" && drops > 0 {
			drops--
			return informer.WatchFault{Drop: true, RelistAfter: 5 * time.Second}
		}
		return informer.WatchFault{}
	}})
	c := w.api.AdminClient()
	c.Create(ctx, mkNode("a", "0"))
	c.Create(ctx, mkNode("gone", "0"))
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	w.seen = nil
	setLabel(t, c, "a", "1") // dropped: the watch breaks
	c.Create(ctx, mkNode("b", "0"))
	if err := c.Delete(ctx, mkNode("gone", "")); err != nil {
		t.Fatal(err)
	}
	w.run(4 * time.Second)
	if got := labelOf(t, w.client, "a"); got != "0" {
		t.Fatalf("before the relist: a has %q, want the stale 0", got)
	}
	if got := labelOf(t, w.client, "b"); got != "<none>" {
		t.Fatalf("before the relist: b is %q, want not seen (events after a drop are lost)", got)
	}
	w.run(time.Second)
	if got, got2, got3 := labelOf(t, w.client, "a"), labelOf(t, w.client, "b"), labelOf(t, w.client, "gone"); got != "1" || got2 != "0" || got3 != "<none>" {
		t.Fatalf("after the relist: a=%q b=%q gone=%q, want 1, 0, <none>", got, got2, got3)
	}
	want := []string{"MODIFIED a rv=3 old=1", "ADDED b rv=4 old=-", "DELETED gone rv=2 old=2"}
	if fmt.Sprint(w.seen) != fmt.Sprint(want) {
		t.Errorf("handled\n%q\nwant\n%q", w.seen, want)
	}
	// The watch works again after the relist.
	setLabel(t, c, "b", "9")
	w.run(time.Millisecond)
	if got := labelOf(t, w.client, "b"); got != "9" {
		t.Errorf("after the relist the watch delivers again: b=%q, want 9", got)
	}
}

func TestRestartRelistsAndCloseDropsInFlight(t *testing.T) {
	w := newWorld(t, opts{delays: []time.Duration{time.Second}})
	c := w.api.AdminClient()
	c.Create(ctx, mkNode("a", "0"))
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	setLabel(t, c, "a", "1")
	w.cache.Close()
	w.seen = nil
	w.run(2 * time.Second)
	if len(w.seen) != 0 {
		t.Fatalf("a closed cache handled %q", w.seen)
	}
	// A new process: a new cache, filled by a list.
	w2 := newWorld(t, opts{})
	w2.api = w.api
	store := apiserver.NewMirror(w.api.AdminClient().Scheme(), w.eng.Clock())
	c2, err := informer.New(informer.Options{Name: "again", Engine: w.eng, Source: w.api, Store: store, Kinds: []client.Object{&corev1.Node{}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := labelOf(t, informer.NewClient(c2, w.api.Client()), "a"); got != "<none>" {
		t.Fatalf("before Sync: %q, want empty", got)
	}
	if err := c2.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := labelOf(t, informer.NewClient(c2, w.api.Client()), "a"); got != "1" {
		t.Fatalf("after Sync: %q, want 1", got)
	}
}

func TestOnlyHoldsTheNamedObject(t *testing.T) {
	w := newWorld(t, opts{only: &client.ObjectKey{Name: "mine"}})
	c := w.api.AdminClient()
	c.Create(ctx, mkNode("mine", "0"))
	c.Create(ctx, mkNode("other", "0"))
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	setLabel(t, c, "other", "1")
	setLabel(t, c, "mine", "1")
	w.run(time.Millisecond)
	if got := labelOf(t, w.client, "mine"); got != "1" {
		t.Errorf("mine: %q, want 1", got)
	}
	if got := labelOf(t, w.client, "other"); got != "<none>" {
		t.Errorf("other: %q, want not held", got)
	}
}

func TestUnheldKindsReadTheServer(t *testing.T) {
	w := newWorld(t, opts{delays: []time.Duration{time.Hour}})
	cm := &corev1.ConfigMap{}
	cm.Name, cm.Namespace = "c", "default"
	if err := w.api.AdminClient().Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Errorf("a kind the cache does not hold is read from the server: %v", err)
	}
}

func TestObserveAfterDelaysTheDeparture(t *testing.T) {
	w := newWorld(t, opts{delays: []time.Duration{10 * time.Millisecond}})
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	sub := w.cache
	w.cache = nil // the subscription stops feeding it; this test does
	if err := w.api.AdminClient().Create(ctx, mkNode("n", "1")); err != nil {
		t.Fatal(err)
	}
	var n corev1.Node
	if err := w.api.AdminClient().Get(ctx, client.ObjectKey{Name: "n"}, &n); err != nil {
		t.Fatal(err)
	}
	sub.ObserveAfter(apiserver.Event{Type: apiserver.Added, Object: &n}, 5*time.Millisecond)
	w.run(14 * time.Millisecond)
	if got := labelOf(t, w.client, "n"); got != "<none>" {
		t.Fatalf("after 14ms: %q, want not yet (5ms to land + 10ms to deliver)", got)
	}
	w.run(time.Millisecond)
	if got := labelOf(t, w.client, "n"); got != "1" {
		t.Fatalf("after 15ms: %q, want 1", got)
	}
}

// The cache holds, and its handler sees, what Transform makes of each
// object; the API server's object is left as it was.
func TestTransformIsWhatTheCacheHolds(t *testing.T) {
	var handled []string
	w := newWorld(t, opts{transform: func(o client.Object) client.Object {
		n := o.(*corev1.Node).DeepCopy()
		n.Annotations = nil
		handled = append(handled, n.Name)
		return n
	}})
	c := w.api.AdminClient()
	n := mkNode("a", "0")
	n.Annotations = map[string]string{"big": "x"}
	c.Create(ctx, n)
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	setLabel(t, c, "a", "1")
	w.run(time.Millisecond)
	var cached, stored corev1.Node
	if err := w.client.Get(ctx, client.ObjectKey{Name: "a"}, &cached); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, &stored); err != nil {
		t.Fatal(err)
	}
	if cached.Annotations != nil || cached.Labels["v"] != "1" {
		t.Errorf("cached node %v %v: want the transformed update (no annotations, v=1)", cached.Annotations, cached.Labels)
	}
	if stored.Annotations["big"] != "x" {
		t.Errorf("the transform changed the server's node: %v", stored.Annotations)
	}
	if len(handled) != 2 {
		t.Errorf("transform ran for %v, want the list and the update", handled)
	}
}

// HoldsList answers by the list's kind, the same when asked again (typed
// lists are remembered by Go type) and for an unstructured list by the
// kind it names.
func TestHoldsList(t *testing.T) {
	w := newWorld(t, opts{})
	unstructuredList := func(kind string) *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		return l
	}
	for i := range 2 {
		for _, c := range []struct {
			list client.ObjectList
			want bool
		}{
			{&corev1.PodList{}, true},
			{&corev1.NodeList{}, true},
			{&corev1.ServiceList{}, false},
			{unstructuredList("PodList"), true},
			{unstructuredList("ServiceList"), false},
		} {
			if got := w.cache.HoldsList(c.list); got != c.want {
				t.Errorf("asked %d time(s): HoldsList(%T %s) = %v, want %v", i+1, c.list, c.list.GetObjectKind().GroupVersionKind().Kind, got, c.want)
			}
		}
	}
}

// A cached Get with client.UnsafeDisableDeepCopy shares the cache's object,
// as a controller-runtime cache does; without it the caller gets a copy. A
// later event replaces the cache's object rather than changing the one a
// shared read holds.
func TestGetUnsafeDisableDeepCopySharesTheCachedObject(t *testing.T) {
	w := newWorld(t, opts{})
	if err := w.cache.Sync(); err != nil {
		t.Fatal(err)
	}
	c := w.api.AdminClient()
	if err := c.Create(ctx, mkNode("a", "0")); err != nil {
		t.Fatal(err)
	}
	w.run(time.Millisecond)
	get := func(opts ...client.GetOption) corev1.Node {
		t.Helper()
		var n corev1.Node
		if err := w.client.Get(ctx, client.ObjectKey{Name: "a"}, &n, opts...); err != nil {
			t.Fatal(err)
		}
		return n
	}
	same := func(a, b map[string]string) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	s1, s2 := get(client.UnsafeDisableDeepCopy), get(client.UnsafeDisableDeepCopy)
	if !same(s1.Labels, s2.Labels) {
		t.Errorf("two reads with UnsafeDisableDeepCopy got different label maps: not the cache's object")
	}
	if c1 := get(); same(c1.Labels, s1.Labels) || c1.Labels["v"] != "0" {
		t.Errorf("a read without UnsafeDisableDeepCopy shares the cache's labels (or reads %v)", c1.Labels)
	}
	if c2 := get(client.UnsafeDisableDeepCopyOption(false)); same(c2.Labels, s1.Labels) {
		t.Errorf("UnsafeDisableDeepCopyOption(false) shares the cache's labels")
	}
	setLabel(t, c, "a", "1")
	w.run(time.Millisecond)
	if s3 := get(client.UnsafeDisableDeepCopy); s3.Labels["v"] != "1" || s1.Labels["v"] != "0" {
		t.Errorf("after the update: shared read %v, the earlier shared read %v; want v=1 and v=0 (kept)", s3.Labels, s1.Labels)
	}
	// A kind the cache does not hold is read from the server, option or not.
	cm := &corev1.ConfigMap{}
	cm.Name, cm.Namespace = "c", "default"
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}, client.UnsafeDisableDeepCopy); err != nil {
		t.Errorf("a kind the cache does not hold, with UnsafeDisableDeepCopy: %v", err)
	}
}
