package critest

import (
	"context"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an in-process OCI registry on 127.0.0.1. Its content
// survives Down and Up, which close and reopen the listener on the same
// port, so clients see a real "connection refused" in between.
type Registry struct {
	// Host is host:port, e.g. 127.0.0.1:40123.
	Host string

	handler  http.Handler
	requests atomic.Int64

	mu     sync.Mutex
	srv    *http.Server
	log    []string
	auth   *[2]string // user, password; nil: open
	onBlob func(path string)
	hidden map[string]bool
	// cutAfter > 0 cuts blob downloads after that many bytes.
	cutAfter int64
}

// NewRegistry starts a registry and stops it when the test ends.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Host = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() { r.Down() })
	return r
}

func (r *Registry) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }() // edge: test harness: the registry serves beside the test
}

func (r *Registry) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	r.mu.Lock()
	r.log = append(r.log, req.Method+" "+req.URL.Path)
	auth, onBlob, hidden, cut := r.auth, r.onBlob, r.hidden, r.cutAfter
	r.mu.Unlock()
	if auth != nil {
		u, p, ok := req.BasicAuth()
		if !ok || u != auth[0] || p != auth[1] {
			w.Header().Set("WWW-Authenticate", `Basic realm="critest"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
	}
	blob := ""
	if i := strings.Index(req.URL.Path, "/blobs/sha256:"); i >= 0 {
		blob = req.URL.Path[i+len("/blobs/"):]
	}
	if blob != "" && hidden[blob] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}`)
		return
	}
	if blob != "" && req.Method == http.MethodGet {
		if onBlob != nil {
			onBlob(req.URL.Path)
		}
		if cut > 0 {
			cw := &cutWriter{ResponseWriter: w, left: cut}
			r.handler.ServeHTTP(cw, req)
			return
		}
	}
	r.handler.ServeHTTP(w, req)
}

// cutWriter passes on the first left bytes of a body, then cuts the
// connection, as a registry that dies mid-download.
type cutWriter struct {
	http.ResponseWriter
	left int64
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if int64(len(b)) <= c.left {
		c.left -= int64(len(b))
		return c.ResponseWriter.Write(b)
	}
	n, _ := c.ResponseWriter.Write(b[:c.left])
	c.left = 0
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if h, ok := c.ResponseWriter.(http.Hijacker); ok {
		if conn, _, err := h.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
	return n, io.ErrClosedPipe
}

// HideBlob makes the registry answer 404 for the blob with this digest
// ("sha256:..."), as a registry whose layer was garbage-collected.
func (r *Registry) HideBlob(digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hidden == nil {
		r.hidden = map[string]bool{}
	}
	r.hidden[digest] = true
}

// CutBlobsAfter makes every blob download stop after n bytes with the
// connection closed; 0 turns it off.
func (r *Registry) CutBlobsAfter(n int64) {
	r.mu.Lock()
	r.cutAfter = n
	r.mu.Unlock()
}

// Requests counts the HTTP requests served since the last ResetRequests.
func (r *Registry) Requests() int64 { return r.requests.Load() }

// RequestLog lists "METHOD path" of the requests since ResetRequests.
func (r *Registry) RequestLog() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// ResetRequests zeroes the request count and log.
func (r *Registry) ResetRequests() {
	r.mu.Lock()
	r.log = nil
	r.mu.Unlock()
	r.requests.Store(0)
}

// RequireAuth makes every request need HTTP basic auth with user and
// password; RequireAuth("", "") opens the registry again.
func (r *Registry) RequireAuth(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if user == "" && password == "" {
		r.auth = nil
		return
	}
	r.auth = &[2]string{user, password}
}

// OnBlob calls f with the path of every blob GET before serving it (nil:
// none); f may call Down.
func (r *Registry) OnBlob(f func(path string)) {
	r.mu.Lock()
	r.onBlob = f
	r.mu.Unlock()
}

// Down closes the listener and every open connection.
func (r *Registry) Down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Up listens again on the same port.
func (r *Registry) Up(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", r.Host); err == nil {
			r.serve(ln)
			return
		}
		time.Sleep(20 * time.Millisecond) // edge: test harness: the old listener's port is released
	}
	t.Fatalf("registry: listen on %s again: %v", r.Host, err)
}

// Image is an image pushed to a Registry.
type Image struct {
	// Ref is the digest reference, Host/repo@sha256:...
	Ref string
	// Size is the compressed size as containerd's CRI reports it:
	// manifest, config and layers.
	Size int64
	// Image is the image itself.
	Image v1.Image
}

// RandomImage builds an image of layers layers with layerBytes random
// (incompressible) bytes each, for linux on this machine's architecture,
// from seed.
func RandomImage(t testing.TB, seed int64, layerBytes, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(layerBytes, layers, random.WithSource(rand.NewSource(seed)))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Cmd = []string{"/bin/true"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Push pushes img as repo (e.g. "apps/web") and returns its digest
// reference and size. Pushing is not counted in Requests.
func (r *Registry) Push(t testing.TB, repo string, img v1.Image) Image {
	t.Helper()
	tag, err := name.NewTag(r.Host + "/" + repo + ":latest")
	if err != nil {
		t.Fatal(err)
	}
	before := r.requests.Load()
	r.mu.Lock()
	auth := r.auth
	r.mu.Unlock()
	opts := []remote.Option{remote.WithContext(context.Background())}
	if auth != nil {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: auth[0], Password: auth[1]}))
	}
	r.mu.Lock()
	logLen := len(r.log)
	r.mu.Unlock()
	if err := remote.Write(tag, img, opts...); err != nil {
		t.Fatalf("push %s: %v", tag, err)
	}
	r.requests.Add(before - r.requests.Load())
	r.mu.Lock()
	r.log = r.log[:logLen]
	r.mu.Unlock()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return Image{Ref: r.Host + "/" + repo + "@" + d.String(), Size: size, Image: img}
}

// MissingRef is a digest reference to repo in r that no image has.
func (r *Registry) MissingRef(repo string) string {
	return r.Host + "/" + repo + "@sha256:" + strings.Repeat("0f", 32)
}

// String names the registry in test logs.
func (r *Registry) String() string { return fmt.Sprintf("registry %s", r.Host) }
