package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/sim/apiserver"
)

// The real API server, shared by the tests: envtest's kube-apiserver and
// etcd from KUBEBUILDER_ASSETS, with bootroll's CRDs installed.
var (
	realCfg *rest.Config
	realEnv *envtest.Environment
	scheme  = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	flag.Parse()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if testing.Short() {
			os.Exit(m.Run()) // the tests skip themselves
		}
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, which builds kube-apiserver and etcd into bin/k8s")
		os.Exit(1)
	}
	realEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	realCfg, err = realEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = realEnv.Stop()
	os.Exit(code)
}

// backend is one API server under test, as a scenario sees it.
type backend struct {
	name string
	c    client.Client
	// watch is the backend's watch source.
	watch watchSource
	// eventually reports whether cond holds, at once for the twin (whose
	// writes and their consequences are synchronous) or within a bound
	// for the real server (whose garbage collector runs apart).
	eventually func(cond func() bool) bool
}

// watchEvent is one event of a watch: its type and object.
type watchEvent struct {
	Type string
	Obj  client.Object
}

// watchSource starts watches of one kind in one namespace.
type watchSource interface {
	// Watch watches the objects of list's kind in namespace ns from now on.
	Watch(ctx context.Context, list client.ObjectList, ns string) (watchStream, error)
}

// watchStream is a started watch.
type watchStream interface {
	// Next returns the next n events, or an error when fewer come.
	Next(n int) ([]watchEvent, error)
	Stop()
}

// twinBackend is a new twin API server with the field indexes the twin
// registers (index.All), on a fake clock.
func twinBackend(t *testing.T) *backend {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := apiserver.New(scheme, clk)
	for _, ix := range index.All() {
		if err := s.IndexField(context.Background(), ix.Object, ix.Field, ix.Extract); err != nil {
			t.Fatalf("index %s: %v", ix.Field, err)
		}
	}
	return &backend{
		name:       "twin",
		c:          s.Client(),
		watch:      twinWatch{s},
		eventually: func(cond func() bool) bool { return cond() },
	}
}

// realBackend is a client of the shared envtest API server.
func realBackend(t *testing.T) *backend {
	if realCfg == nil {
		t.Skip("needs a real API server (KUBEBUILDER_ASSETS); run make test")
	}
	c, err := client.NewWithWatch(realCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &backend{
		name:  "real",
		c:     c,
		watch: realWatch{c},
		eventually: func(cond func() bool) bool {
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if cond() {
					return true
				}
				if time.Now().After(deadline) {
					return false
				}
			}
		},
	}
}

// twinWatch is the twin's watch: a subscription to the server's writes.
type twinWatch struct{ s *apiserver.Server }

func (w twinWatch) Watch(_ context.Context, list client.ObjectList, ns string) (watchStream, error) {
	gvk, err := w.s.AdminClient().GroupVersionKindFor(list)
	if err != nil {
		return nil, err
	}
	item, err := scheme.New(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
	if err != nil {
		return nil, err
	}
	st := &twinStream{}
	want := reflect.TypeOf(item)
	st.cancel = w.s.Subscribe(func(ev apiserver.Event) {
		if reflect.TypeOf(ev.Object) != want || (ns != "" && ev.Object.GetNamespace() != ns) {
			return
		}
		st.events = append(st.events, watchEvent{Type: string(ev.Type), Obj: ev.Object.DeepCopyObject().(client.Object)})
	})
	return st, nil
}

type twinStream struct {
	events []watchEvent
	cancel func()
}

func (st *twinStream) Next(n int) ([]watchEvent, error) {
	if len(st.events) < n {
		return st.events, fmt.Errorf("%d events, want %d", len(st.events), n)
	}
	out := st.events[:n]
	st.events = st.events[n:]
	return out, nil
}

func (st *twinStream) Stop() { st.cancel() }

// realWatch is a watch of the real API server.
type realWatch struct{ c client.WithWatch }

func (w realWatch) Watch(ctx context.Context, list client.ObjectList, ns string) (watchStream, error) {
	wi, err := w.c.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	return &realStream{w: wi}, nil
}

type realStream struct{ w watch.Interface }

func (st *realStream) Next(n int) ([]watchEvent, error) {
	var out []watchEvent
	for len(out) < n {
		select {
		case ev, ok := <-st.w.ResultChan():
			if !ok {
				return out, fmt.Errorf("watch closed after %d events, want %d", len(out), n)
			}
			obj, isObj := ev.Object.(client.Object)
			if !isObj {
				return out, fmt.Errorf("watch event %s of %T", ev.Type, ev.Object)
			}
			out = append(out, watchEvent{Type: string(ev.Type), Obj: obj})
		case <-time.After(10 * time.Second):
			return out, fmt.Errorf("%d events in time, want %d", len(out), n)
		}
	}
	return out, nil
}

func (st *realStream) Stop() { st.w.Stop() }

// outcome is the comparable result of a request: "ok", or the error's
// reason and HTTP code.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		reason := apierrors.ReasonForError(err)
		if reason == "" {
			// No reason: the message is all that tells errors apart.
			return fmt.Sprintf("(no reason) %d %q", st.Status().Code, st.Status().Message)
		}
		return fmt.Sprintf("%s %d", reason, st.Status().Code)
	}
	return "non-API error"
}

// transcript records a scenario's steps and their results in a form that
// is the same on both servers where they behave alike: names, outcomes,
// the fields that matter, and resourceVersions only as how they relate
// (changed or not, increasing), never their values.
type transcript struct {
	t     *testing.T
	lines []string
}

func (tr *transcript) add(step, format string, args ...any) {
	tr.lines = append(tr.lines, step+": "+fmt.Sprintf(format, args...))
}

// js is v as compact JSON, for fields in a transcript.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// compare fails t with the lines where the transcripts differ.
func compare(t *testing.T, twin, real []string) {
	t.Helper()
	n := max(len(twin), len(real))
	bad := 0
	for i := range n {
		var a, b string
		if i < len(twin) {
			a = twin[i]
		}
		if i < len(real) {
			b = real[i]
		}
		if a != b {
			bad++
			t.Errorf("step %d differs:\n  twin: %s\n  real: %s", i, a, b)
		}
	}
	if bad == 0 {
		t.Logf("%d steps, all the same", n)
	}
}

// run runs scenario against the twin and the real server and compares the
// transcripts.
func run(t *testing.T, scenario func(ctx context.Context, b *backend, tr *transcript)) {
	t.Helper()
	real := realBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out [2][]string
	for i, b := range []*backend{twinBackend(t), real} {
		tr := &transcript{t: t}
		scenario(ctx, b, tr)
		out[i] = tr.lines
	}
	if testing.Verbose() {
		t.Logf("twin transcript:\n%s", strings.Join(out[0], "\n"))
	}
	compare(t, out[0], out[1])
}

// kcmPath is where make tools puts kube-controller-manager.
func kcmPath() string {
	return filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager")
}

// startGC runs kube-controller-manager with only the garbage collector
// against the shared API server, or skips t when the binary is missing.
func startGC(t *testing.T) {
	t.Helper()
	if realCfg == nil {
		t.Skip("needs a real API server (KUBEBUILDER_ASSETS); run make test")
	}
	bin := kcmPath()
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("skipped: garbage collection needs kube-controller-manager, and %s is missing (make tools builds it)", bin)
	}
	user, err := realEnv.AddUser(envtest.User{Name: "conformance-gc", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add a user for kube-controller-manager: %v", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	dir := t.TempDir()
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "kcm.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Only the garbage collector: the disruption controller would rewrite
	// the PDB statuses the eviction scenario sets by hand.
	cmd := exec.Command(bin, "--kubeconfig="+kcPath, "--controllers=garbagecollector",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("kube-controller-manager log (tail):\n%s", tail(string(b), 4000))
			}
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
