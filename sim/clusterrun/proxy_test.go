package clusterrun

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/bootroll/bootroll/sim/scenario"
)

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		watch        bool
		want         APIRequest
	}{
		{"GET", "/api/v1/nodes", false, APIRequest{Verb: "list", Resource: "nodes"}},
		{"GET", "/api/v1/nodes", true, APIRequest{Verb: "watch", Resource: "nodes"}},
		{"GET", "/api/v1/nodes/n1", false, APIRequest{Verb: "get", Resource: "nodes", Name: "n1"}},
		{"POST", "/api/v1/namespaces/default/pods/p/eviction", false, APIRequest{Verb: "create", Sub: "eviction", Resource: "pods", Namespace: "default", Name: "p"}},
		{"PATCH", "/apis/bootroll.dev/v1alpha1/bootcnodes/n1/status", false, APIRequest{Verb: "patch", Sub: "status", Resource: "bootcnodes", Name: "n1"}},
		{"DELETE", "/api/v1/namespaces/default/pods", false, APIRequest{Verb: "deletecollection", Resource: "pods", Namespace: "default"}},
		{"PUT", "/api/v1/namespaces/kube-system", false, APIRequest{Verb: "update", Resource: "namespaces", Name: "kube-system"}},
	} {
		got, ok := ParseRequest(tc.method, tc.path, tc.watch)
		if !ok || got != tc.want {
			t.Errorf("%s %s: got %+v %v, want %+v", tc.method, tc.path, got, ok, tc.want)
		}
	}
	for _, p := range []string{"/version", "/apis", "/api/v1", "/apis/bootroll.dev/v1alpha1"} {
		if _, ok := ParseRequest("GET", p, false); ok {
			t.Errorf("%s: parsed as an object request", p)
		}
	}
}

func TestHits(t *testing.T) {
	patchStatus := APIRequest{Verb: "patch", Sub: "status"}
	for _, tc := range []struct {
		verbs []string
		r     APIRequest
		want  bool
	}{
		{nil, patchStatus, true},
		{nil, APIRequest{Verb: "watch"}, false},
		{[]string{"patch"}, patchStatus, true},
		{[]string{"patch/status"}, patchStatus, true},
		{[]string{"patch/status"}, APIRequest{Verb: "patch"}, false},
		{[]string{"create/eviction"}, APIRequest{Verb: "create", Sub: "eviction"}, true},
		{[]string{"get"}, patchStatus, false},
	} {
		if got := Hits(&scenario.APIErrors{Verbs: tc.verbs}, tc.r); got != tc.want {
			t.Errorf("verbs %v, %+v: got %v, want %v", tc.verbs, tc.r, got, tc.want)
		}
	}
}

// TestProxy runs the proxy in front of a fake API server: it records
// evictions, counts the refused ones, and fails requests while a fault
// is in effect.
func TestProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/blocked/eviction") {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer backend.Close()
	p, err := NewProxy("controller", &rest.Config{Host: backend.URL}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	post := func(path string) int {
		resp, err := http.Post(p.URL()+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/api/v1/namespaces/default/pods/ok/eviction"); code != http.StatusCreated {
		t.Fatalf("eviction: got %d", code)
	}
	if !p.Asked("default/ok") {
		t.Errorf("the granted eviction was not recorded")
	}
	if code := post("/api/v1/namespaces/default/pods/blocked/eviction"); code != http.StatusTooManyRequests {
		t.Fatalf("refused eviction: got %d", code)
	}
	// The proxy books the answer after the client may have read it.
	for i := 0; i < 100 && p.Refused() != 1; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if p.Asked("default/blocked") || p.Refused() != 1 {
		t.Errorf("refused eviction: asked %v, refused %d; want false, 1", p.Asked("default/blocked"), p.Refused())
	}
	p.SetFault(&scenario.APIErrors{Rate: 1, Codes: []scenario.APIErrorCode{"conflict"}, Who: "controller"})
	if code := post("/api/v1/namespaces/default/pods/x/eviction"); code != http.StatusConflict {
		t.Errorf("under a fault: got %d, want 409", code)
	}
	if p.Asked("default/x") {
		t.Errorf("a failed request was recorded as asked")
	}
	p.SetFault(&scenario.APIErrors{Rate: 1, Who: "daemon"})
	if code := post("/api/v1/namespaces/default/pods/y/eviction"); code != http.StatusCreated {
		t.Errorf("a daemon fault hit the controller's proxy: got %d", code)
	}
	p.SetFault(nil)
	for i := 0; i < 100; i++ {
		if served, _ := p.Counts(); served == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if served, failed := p.Counts(); served != 3 || failed != 1 {
		t.Errorf("counts: served %d failed %d, want 3 1", served, failed)
	}
}

// TestProxyFailedOn: the proxy reports, by node, the requests for a
// node's Node or BootcNode it failed on purpose (the cleanup judge's
// refused requests), once; not those for other objects or lists.
func TestProxyFailedOn(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	defer backend.Close()
	p, err := NewProxy("controller", &rest.Config{Host: backend.URL}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	get := func(path string) {
		resp, err := http.Get(p.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	p.SetFault(&scenario.APIErrors{Rate: 1, Codes: []scenario.APIErrorCode{"internalError"}, Who: "controller"})
	get("/api/v1/nodes/workers-1")
	get("/apis/bootroll.dev/v1alpha1/bootcnodes/workers-2")
	get("/api/v1/namespaces/default/pods/web-1")
	get("/api/v1/nodes")
	on := p.FailedOn()
	if len(on) != 2 || on["workers-1"].IsZero() || on["workers-2"].IsZero() {
		t.Errorf("failed on %v, want workers-1 and workers-2", on)
	}
	if again := p.FailedOn(); len(again) != 0 {
		t.Errorf("reported twice: %v", again)
	}
}

// TestProxyControllerCrash: an armed controllerCrash counts only the
// process's successful writes; at the crashing write the write lands,
// its answer is withheld, the crash is reported, and nothing more of
// the process is forwarded until Revive.
func TestProxyControllerCrash(t *testing.T) {
	var mu sync.Mutex
	var landed []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		landed = append(landed, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/conflict") {
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.Header().Set("X-Backend", "yes")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"kind":"Node"}`)) //nolint:errcheck // test server
	}))
	defer backend.Close()
	p, err := NewProxy("controller", &rest.Config{Host: backend.URL}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	do := func(method, path string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, p.URL()+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Backend"), string(b)
	}
	landedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(landed)
	}
	p.ArmCrash("controllerCrash@1m0s", scenario.ControllerCrash{AfterWrites: 2, DownFor: 7 * time.Second})
	// Reads and failed writes do not count; a counted write's answer
	// comes back whole.
	if code, _, _ := do("GET", "/api/v1/nodes/n1"); code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}
	if code, _, _ := do("PATCH", "/api/v1/nodes/conflict"); code != http.StatusConflict {
		t.Fatalf("conflicting patch: %d", code)
	}
	// Nor do the event recorder's Events and leader election's Leases.
	if code, _, _ := do("POST", "/api/v1/namespaces/default/events"); code != http.StatusOK {
		t.Fatalf("event: %d", code)
	}
	if code, _, _ := do("PUT", "/apis/coordination.k8s.io/v1/namespaces/bootroll-system/leases/bootroll"); code != http.StatusOK {
		t.Fatalf("lease: %d", code)
	}
	if code, hdr, body := do("PATCH", "/api/v1/nodes/n1"); code != http.StatusOK || hdr != "yes" || body != `{"kind":"Node"}` {
		t.Fatalf("first write: %d %q %q, want the backend's answer", code, hdr, body)
	}
	select {
	case c := <-p.Crashes():
		t.Fatalf("crashed after the first successful write: %+v", c)
	default:
	}
	before := landedCount()
	if code, _, _ := do("PATCH", "/apis/bootroll.dev/v1alpha1/bootcnodes/n1/status"); code != http.StatusServiceUnavailable {
		t.Fatalf("crashing write: %d, want 503 (its answer withheld)", code)
	}
	if landedCount() != before+1 {
		t.Fatalf("the crashing write did not reach the API server")
	}
	select {
	case c := <-p.Crashes():
		want := Crash{Fault: "controllerCrash@1m0s", DownFor: 7 * time.Second, Verb: "patch/status", Object: "bootcnodes/n1"}
		if c != want {
			t.Errorf("crash: got %+v, want %+v", c, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no crash reported")
	}
	before = landedCount()
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		if code, _, _ := do(m, "/api/v1/nodes/n2"); code != http.StatusServiceUnavailable {
			t.Errorf("%s while crashing: %d, want 503", m, code)
		}
	}
	if landedCount() != before {
		t.Errorf("requests of the crashed process reached the API server")
	}
	// A new process: requests go through, and the afterWrites crash
	// happened once.
	p.Revive()
	for i := range 3 {
		if code, _, _ := do("PATCH", "/api/v1/nodes/n1"); code != http.StatusOK {
			t.Fatalf("write %d after Revive: %d", i, code)
		}
	}
	select {
	case c := <-p.Crashes():
		t.Errorf("a second afterWrites crash: %+v", c)
	default:
	}
	// Disarmed, a rate-1 fault crashes nothing.
	p.ArmCrash("rate", scenario.ControllerCrash{Rate: 1})
	p.DisarmCrash("rate")
	p.DisarmCrash("controllerCrash@1m0s")
	if code, _, _ := do("PATCH", "/api/v1/nodes/n1"); code != http.StatusOK {
		t.Errorf("write with the faults disarmed: %d", code)
	}
}

// TestProxyConflictFailsOnlyWrites: as in the twin, a conflict fault
// fails no get or list (no API server answers a read with 409), and a
// read it hits draws from the other codes.
func TestProxyConflictFailsOnlyWrites(t *testing.T) {
	p := &Proxy{who: "controller"}
	p.rng = rand.New(rand.NewPCG(1, 1))
	p.fault = &scenario.APIErrors{Rate: 1, Codes: []scenario.APIErrorCode{"conflict"}}
	for _, r := range []APIRequest{{Verb: "get", Resource: "nodes", Name: "n1"}, {Verb: "list", Resource: "nodes"}} {
		if in := p.draw(r); in.code != 0 {
			t.Errorf("%s under a conflict fault: %d, want it served", r.Verb, in.code)
		}
	}
	if in := p.draw(APIRequest{Verb: "patch", Resource: "nodes", Name: "n1"}); in.code != http.StatusConflict {
		t.Errorf("patch under a conflict fault: %d, want 409", in.code)
	}
	p.fault.Codes = append(p.fault.Codes, "internalError")
	for range 50 {
		if in := p.draw(APIRequest{Verb: "get", Resource: "nodes", Name: "n1"}); in.code != http.StatusInternalServerError {
			t.Fatalf("get under conflict and internalError: %d, want 500 every time", in.code)
		}
	}
}
