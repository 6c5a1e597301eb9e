package clusterrun

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bootroll/bootroll/sim/scenario"
)

// Proxy is a reverse proxy in front of the API server for one kind of
// process (the controller, or the host-mode daemon): the process's
// kubeconfig points at it (plain HTTP on 127.0.0.1, no credentials) and
// it forwards with the admin's credentials. It fails or slows requests
// while an apiErrors fault is in effect, and it notes the pod evictions
// and deletions the process asks for, so that the run can tell the
// invariant checker which pod removals are bootroll's, and the evictions
// PodDisruptionBudgets refused.
type Proxy struct {
	who string
	ln  net.Listener
	srv *http.Server

	mu      sync.Mutex
	fault   *scenario.APIErrors
	rng     *rand.Rand
	asked   map[string]int // namespace/name of pods asked to be removed, not refused
	refused uint64
	served  uint64
	failed  uint64

	// The controllerCrash faults in effect (ArmCrash), whether the
	// process is crashing (from the write that crashed it until Revive),
	// and where the crashes are reported.
	crashes  []*armedCrash
	crashing bool
	crashed  chan Crash
	// lastFailed is when a request was last failed on purpose; failedOn
	// when one for a node's Node or BootcNode was, by node, since the
	// last FailedOn.
	lastFailed time.Time
	failedOn   map[string]time.Time
}

// Crash is a controllerCrash fault that fired: the process's write that
// it came right after, as the proxy saw it.
type Crash struct {
	// Fault names the fault (Step.Label), DownFor is its downFor.
	Fault   string
	DownFor time.Duration
	// Verb is the write's verb (VerbForm), Object its resource and name.
	Verb, Object string
}

// armedCrash is a controllerCrash fault in effect: its successful writes
// counted so far, and whether its one afterWrites crash happened.
type armedCrash struct {
	label string
	f     scenario.ControllerCrash
	n     scenario.CrashCount
}

// NewProxy starts a proxy for who ("controller" or "daemon") in front of
// the API server of cfg, on a free port of 127.0.0.1.
func NewProxy(who string, cfg *rest.Config, seed uint64) (*Proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("proxy: API server URL %q: %w", cfg.Host, err)
	}
	if target.Scheme == "" {
		target, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return nil, err
		}
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{who: who, ln: ln, rng: rand.New(rand.NewPCG(seed, uint64(len(who)))), asked: map[string]int{}, crashed: make(chan Crash, 16)}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     tr,
		FlushInterval: -1, // watches stream
	}
	p.srv = &http.Server{Handler: p.handler(rp), ReadHeaderTimeout: 30 * time.Second}
	go p.srv.Serve(ln) //nolint:errcheck // edge: the proxy's server goroutine; Close ends it
	return p, nil
}

// URL is the proxy's address.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// SetFault puts an apiErrors fault in effect, or none with nil.
func (p *Proxy) SetFault(f *scenario.APIErrors) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// ArmCrash puts a controllerCrash fault, named label, in effect: from
// now on the proxy counts the process's successful writes (as the twin
// counts them: a write the API server applied and answered with
// success) and, at the write the fault crashes the process after (the
// afterWrites-th, or each with probability rate), withholds that write's
// answer, answers every later request of the process 503 without
// forwarding it, and reports the crash on Crashes. The run then kills
// the process and, downFor later, starts a new one and calls Revive.
// Writes forwarded before the crashing one was answered still land: a
// real process's requests run concurrently.
func (p *Proxy) ArmCrash(label string, f scenario.ControllerCrash) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashes = append(p.crashes, &armedCrash{label: label, f: f})
}

// DisarmCrash ends the controllerCrash fault named label.
func (p *Proxy) DisarmCrash(label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashes = slices.DeleteFunc(p.crashes, func(c *armedCrash) bool { return c.label == label })
}

// Crashes reports the crashes the armed faults cause.
func (p *Proxy) Crashes() <-chan Crash { return p.crashed }

// Revive lets requests through again after a crash: a new process runs.
func (p *Proxy) Revive() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashing = false
}

// crashAfter counts a successful write of the process for the armed
// crash faults and reports whether one crashes the process right after
// it; the process is crashing from then on. Called with p.mu held.
func (p *Proxy) crashAfter(r APIRequest) bool {
	if p.crashing {
		return true
	}
	for _, c := range p.crashes {
		if !c.n.Step(c.f.AfterWrites, c.f.Rate, p.rng.Float64) {
			continue
		}
		p.crashing = true
		object := r.Resource + "/" + r.Name
		if r.Namespace != "" {
			object = r.Resource + "/" + r.Namespace + "/" + r.Name
		}
		select {
		case p.crashed <- Crash{Fault: c.label, DownFor: c.f.DownFor, Verb: r.VerbForm(), Object: object}:
		default: // the run reads each crash before the next can happen
		}
		return true
	}
	return false
}

// Asked reports whether the process asked to evict or delete the pod
// namespace/name and was not refused.
func (p *Proxy) Asked(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked[key] > 0
}

// Refused counts the evictions the API server refused with 429 (a
// PodDisruptionBudget).
func (p *Proxy) Refused() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Counts returns the requests served and failed on purpose.
func (p *Proxy) Counts() (served, failed uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served, p.failed
}

// WriteKubeconfig writes a kubeconfig that points at the proxy.
func (p *Proxy) WriteKubeconfig(path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL()}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	return clientcmd.WriteToFile(*cfg, path)
}

// APIRequest is what the proxy reads from a request's method and path.
type APIRequest struct {
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection; Sub the subresource (status, eviction), if any.
	Verb, Sub string
	// Resource is the plural resource; Namespace and Name as in the path.
	Resource, Namespace, Name string
}

// VerbForm is the request's verb as apiErrors.verbs writes it: the verb,
// or verb/subresource.
func (r APIRequest) VerbForm() string {
	if r.Sub != "" {
		return r.Verb + "/" + r.Sub
	}
	return r.Verb
}

// write reports whether the request is a write the crash faults count,
// as the twin's apiserver.Request.Write does: anything but get, list and
// watch, except Events (the event recorder writes them on its own
// goroutine; the twin's recorder writes none) and Leases (leader
// election's renewals; the twin has none).
func (r APIRequest) write() bool {
	switch {
	case r.Verb == "get", r.Verb == "list", r.Verb == "watch":
		return false
	case r.Resource == "events", r.Resource == "leases":
		return false
	}
	return true
}

// ParseRequest reads a Kubernetes API request's verb and object from its
// method, path and query. ok is false for paths outside /api and /apis
// (discovery of /version, /openapi, health).
func ParseRequest(method, path string, watch bool) (r APIRequest, ok bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return r, false
	}
	if len(segs) == 0 {
		return r, false // discovery
	}
	if segs[0] == "namespaces" && len(segs) >= 3 {
		r.Namespace = segs[1]
		segs = segs[2:]
	}
	r.Resource = segs[0]
	if len(segs) > 1 {
		r.Name = segs[1]
	}
	if len(segs) > 2 {
		r.Sub = segs[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case watch:
			r.Verb = "watch"
		case r.Name == "":
			r.Verb = "list"
		default:
			r.Verb = "get"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		r.Verb = "delete"
		if r.Name == "" {
			r.Verb = "deletecollection"
		}
	default:
		return r, false
	}
	return r, true
}

// Hits reports whether an apiErrors fault's verbs hit the request: a
// plain verb hits its subresource forms too; no verbs hit all but
// watches.
func Hits(f *scenario.APIErrors, r APIRequest) bool {
	if r.Verb == "watch" {
		return false
	}
	if len(f.Verbs) == 0 {
		return true
	}
	return slices.Contains(f.Verbs, r.Verb) || slices.Contains(f.Verbs, r.VerbForm())
}

// removal is the pod key a request asks to remove, or "".
func removal(r APIRequest) string {
	if r.Resource != "pods" || r.Name == "" {
		return ""
	}
	if r.Verb == "create" && r.Sub == "eviction" || r.Verb == "delete" && r.Sub == "" {
		return r.Namespace + "/" + r.Name
	}
	return ""
}

// injected is the failure drawn for one request.
type injected struct {
	code    int // 0: none
	reason  string
	forward bool // a timeout that is applied anyway
	delay   time.Duration
}

func (p *Proxy) draw(r APIRequest) injected {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if f == nil || (f.Who != "all" && f.Who != "" && string(f.Who) != p.who) || !Hits(f, r) {
		return injected{}
	}
	var in injected
	if f.Latency != nil {
		in.delay = f.Latency.Sample(p.rng)
	}
	if f.Rate > 0 && p.rng.Float64() < f.Rate {
		codes := f.CodesFor(r.Verb != "get" && r.Verb != "list")
		if len(codes) == 0 {
			return in // conflict, on a read
		}
		switch codes[p.rng.IntN(len(codes))] {
		case "conflict":
			in.code, in.reason = http.StatusConflict, "Conflict"
		case "tooManyRequests":
			in.code, in.reason = http.StatusTooManyRequests, "TooManyRequests"
		case "timeout":
			in.code, in.reason = http.StatusGatewayTimeout, "Timeout"
			in.forward = p.rng.IntN(2) == 0
		default:
			in.code, in.reason = http.StatusInternalServerError, "InternalError"
		}
	}
	return in
}

func (p *Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r, ok := ParseRequest(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1")
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		if p.isCrashing() {
			p.failedRequest(r)
			writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "injected by bootroll scenario run --target cluster: the "+p.who+" crashed (controllerCrash); this request of the dying process is not forwarded")
			return
		}
		in := p.draw(r)
		if in.delay > 0 {
			time.Sleep(in.delay) // edge: injected API latency, on the request's own goroutine
		}
		key := removal(r)
		if in.code != 0 && !in.forward {
			p.failedRequest(r)
			writeStatus(w, in.code, in.reason, fmt.Sprintf("injected by bootroll scenario run --target cluster (%s)", r.VerbForm()))
			return
		}
		if key != "" {
			p.mu.Lock()
			p.asked[key]++
			p.mu.Unlock()
		}
		rec := &codeWriter{ResponseWriter: w}
		var held *heldAnswer // a write's answer, kept until the crash faults had their say
		switch {
		case in.forward:
			next.ServeHTTP(&discard{header: http.Header{}}, req)
			rec.code = http.StatusOK
		case r.write() && p.crashArmed():
			held = &heldAnswer{header: http.Header{}}
			next.ServeHTTP(held, req)
			rec.code = held.status()
		default:
			next.ServeHTTP(rec, req)
		}
		p.mu.Lock()
		p.served++
		if key != "" && rec.code >= 300 {
			p.asked[key]--
			if r.Sub == "eviction" && rec.code == http.StatusTooManyRequests {
				p.refused++
			}
		}
		crash := held != nil && rec.code < 300 && p.crashAfter(r)
		p.mu.Unlock()
		switch {
		case crash:
			// The write landed; the process never hears of it.
			p.failedRequest(r)
			writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "injected by bootroll scenario run --target cluster: the "+p.who+" crashed right after this write (controllerCrash); the write was applied")
			return
		case held != nil:
			held.replay(w)
		}
		if in.forward {
			p.failedRequest(r)
			writeStatus(w, in.code, in.reason, "injected timeout (the request was applied)")
		}
	})
}

// isCrashing reports whether the process is crashing: its requests are
// refused until Revive.
func (p *Proxy) isCrashing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashing
}

// crashArmed reports whether a crash fault is in effect.
func (p *Proxy) crashArmed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.crashes) > 0
}

// failedRequest counts r, failed on purpose, and notes when.
func (p *Proxy) failedRequest(r APIRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed++
	p.lastFailed = time.Now() // edge: the proxy serves on the wall clock
	if (r.Resource == "nodes" || r.Resource == "bootcnodes") && r.Name != "" {
		if p.failedOn == nil {
			p.failedOn = map[string]time.Time{}
		}
		p.failedOn[r.Name] = p.lastFailed
	}
}

// FailedOn returns, by node, when the proxy last failed a request for
// the node's Node or BootcNode (both named after it) since the last call,
// and forgets them.
func (p *Proxy) FailedOn() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.failedOn
	p.failedOn = nil
	return out
}

// LastFailed is when the proxy last failed a request on purpose (zero if
// never).
func (p *Proxy) LastFailed() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastFailed
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // the client may be gone
		"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": msg, "reason": reason, "code": code,
	})
}

// codeWriter records the status code; it passes Flush on for watches.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.ResponseWriter.Write(b)
}

func (c *codeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// heldAnswer is a ResponseWriter that keeps a write's answer (writes
// are answered with one small object) until replay.
type heldAnswer struct {
	header http.Header
	code   int
	body   []byte
}

func (h *heldAnswer) Header() http.Header { return h.header }
func (h *heldAnswer) Write(b []byte) (int, error) {
	h.body = append(h.body, b...)
	return len(b), nil
}
func (h *heldAnswer) WriteHeader(code int) {
	if h.code == 0 {
		h.code = code
	}
}

// status is the answer's status code.
func (h *heldAnswer) status() int {
	if h.code == 0 {
		return http.StatusOK
	}
	return h.code
}

// replay writes the kept answer to w.
func (h *heldAnswer) replay(w http.ResponseWriter) {
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.WriteHeader(h.status())
	w.Write(h.body) //nolint:errcheck // the client may be gone
}

// discard is a ResponseWriter that drops the answer of a request applied
// behind an injected timeout.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
