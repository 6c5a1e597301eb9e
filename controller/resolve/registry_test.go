package resolve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
)

// newRegistry returns an in-process registry handler and a plain server on
// 127.0.0.1 that tests push through. Other servers may front the same
// handler (with auth, without HEAD...) and so see the same images.
func newRegistry(t *testing.T) (http.Handler, string) {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return h, serve(t, h)
}

// serve starts h on 127.0.0.1 and returns its host:port.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func parseRef(t *testing.T, ref string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatalf("parse %q: %v", ref, err)
	}
	return r
}

// pushImage pushes a small image generated from seed and returns its digest.
func pushImage(t *testing.T, ref string, seed int64) v1.Hash {
	t.Helper()
	img, err := random.Image(256, 1, random.WithSource(rand.NewSource(seed)))
	if err != nil {
		t.Fatalf("random image: %v", err)
	}
	if err := remote.Write(parseRef(t, ref), img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("digest of %s: %v", ref, err)
	}
	return d
}

// pushIndex pushes a two-platform index generated from seed and returns the
// index digest.
func pushIndex(t *testing.T, ref string, seed int64) v1.Hash {
	t.Helper()
	idx, err := random.Index(256, 1, 2, random.WithSource(rand.NewSource(seed)))
	if err != nil {
		t.Fatalf("random index: %v", err)
	}
	if err := remote.WriteIndex(parseRef(t, ref), idx); err != nil {
		t.Fatalf("push index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatalf("digest of index %s: %v", ref, err)
	}
	return d
}

// requireBasicAuth fronts h with HTTP basic auth, as a registry behind a
// simple auth proxy does.
func requireBasicAuth(h http.Handler, user, pass string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// methodCounter counts requests by method.
type methodCounter struct {
	head, get, all atomic.Int64
}

// refuseHead fronts h with a server that answers every HEAD with 405.
func refuseHead(h http.Handler, c *methodCounter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.all.Add(1)
		switch r.Method {
		case http.MethodHead:
			c.head.Add(1)
			http.Error(w, "", http.StatusMethodNotAllowed)
			return
		case http.MethodGet:
			if strings.Contains(r.URL.Path, "/manifests/") {
				c.get.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// dockerConfig builds a kubernetes.io/dockerconfigjson secret with one
// "auth" entry.
func dockerConfig(t *testing.T, key, user, pass string) *corev1.Secret {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"auths": map[string]any{
			key: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: b}}
}

// rawSecret is a secret of type typ holding doc in that type's key.
func rawSecret(typ corev1.SecretType, doc string) *corev1.Secret {
	key := corev1.DockerConfigJsonKey
	if typ == corev1.SecretTypeDockercfg {
		key = corev1.DockerConfigKey
	}
	return &corev1.Secret{Type: typ, Data: map[string][]byte{key: []byte(doc)}}
}

// redirect sends every request to one host:port whatever registry it
// names, so a test can resolve "docker.io/..." or "eu.registry.test/..."
// against a local server and check which pull-secret key is used.
type redirect string

func (to redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Host = string(to)
	return http.DefaultTransport.RoundTrip(r)
}

func TestRegistryResolve(t *testing.T) {
	h, host := newRegistry(t)
	v1Digest := pushImage(t, host+"/app:v1", 1)
	latest := pushImage(t, host+"/app:latest", 2)
	index := pushIndex(t, host+"/multi:v1", 3)
	hubDigest := pushImage(t, host+"/library/app:v1", 4)

	authHost := serve(t, requireBasicAuth(h, "alice", "s3cret"))

	// A server that accepts connections and never answers.
	hangHost := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))

	stopped := httptest.NewServer(h)
	stoppedHost := strings.TrimPrefix(stopped.URL, "http://")
	stopped.Close()

	insecure := &Registry{Insecure: true}
	tests := []struct {
		name     string
		r        *Registry
		ref      string
		secret   *corev1.Secret
		want     string
		wantKind ErrorKind
		wantErr  string // substring of the error, when set
	}{
		{name: "tag resolves to pushed digest", r: insecure, ref: host + "/app:v1", want: host + "/app@" + v1Digest.String()},
		{name: "no tag means latest", r: insecure, ref: host + "/app", want: host + "/app@" + latest.String()},
		{name: "index resolves to index digest", r: insecure, ref: host + "/multi:v1", want: host + "/multi@" + index.String()},
		{name: "zero value Registry on loopback", r: &Registry{}, ref: host + "/app:v1", want: host + "/app@" + v1Digest.String()},
		{name: "unknown tag", r: insecure, ref: host + "/app:nope", wantKind: KindNotFound},
		{name: "unknown repo", r: insecure, ref: host + "/nope:v1", wantKind: KindNotFound},
		{name: "registry stopped", r: insecure, ref: stoppedHost + "/app:v1", wantKind: KindUnreachable},
		{name: "registry hangs past timeout", r: &Registry{Insecure: true, Timeout: 200 * time.Millisecond}, ref: hangHost + "/app:v1", wantKind: KindUnreachable},
		{name: "upper case repo", r: insecure, ref: "UPPER/case", wantKind: KindInvalidReference},
		{name: "short digest", r: insecure, ref: "a@sha256:short", wantKind: KindInvalidReference},
		{name: "empty ref", r: insecure, ref: "", wantKind: KindInvalidReference},
		{name: "URL scheme", r: insecure, ref: "http://" + host + "/app:v1", wantKind: KindInvalidReference},

		{name: "auth: no secret", r: insecure, ref: authHost + "/app:v1", wantKind: KindUnauthorized},
		{name: "auth: correct secret", r: insecure, ref: authHost + "/app:v1", secret: dockerConfig(t, authHost, "alice", "s3cret"), want: authHost + "/app@" + v1Digest.String()},
		{name: "auth: secret keyed by URL", r: insecure, ref: authHost + "/app:v1", secret: dockerConfig(t, "https://"+authHost+"/v1/", "alice", "s3cret"), want: authHost + "/app@" + v1Digest.String()},
		{name: "auth: username and password fields", r: insecure, ref: authHost + "/app:v1",
			secret: rawSecret(corev1.SecretTypeDockerConfigJson, `{"auths":{"`+authHost+`":{"username":"alice","password":"s3cret"}}}`), want: authHost + "/app@" + v1Digest.String()},
		{name: "auth: wrong password", r: insecure, ref: authHost + "/app:v1", secret: dockerConfig(t, authHost, "alice", "guess"), wantKind: KindUnauthorized},
		{name: "auth: secret for another registry", r: insecure, ref: authHost + "/app:v1", secret: dockerConfig(t, "registry.example.com", "alice", "s3cret"), wantKind: KindUnauthorized},
		{name: "auth: secret is not JSON", r: insecure, ref: authHost + "/app:v1", secret: rawSecret(corev1.SecretTypeDockerConfigJson, `{"s3cret`), wantKind: KindUnauthorized, wantErr: "parse pull secret"},
		{name: "auth: secret is Opaque", r: insecure, ref: authHost + "/app:v1", secret: &corev1.Secret{Type: corev1.SecretTypeOpaque}, wantKind: KindUnauthorized, wantErr: "parse pull secret"},

		// Keys are matched as the kubelet matches them (pullsecret.Keychain).
		{name: "auth: path-prefix key", r: insecure, ref: authHost + "/app:v1", secret: dockerConfig(t, authHost+"/app", "alice", "s3cret"), want: authHost + "/app@" + v1Digest.String()},
		{name: "auth: longer path-prefix key wins", r: insecure, ref: authHost + "/app:v1",
			secret: rawSecret(corev1.SecretTypeDockerConfigJson, `{"auths":{"`+authHost+`":{"username":"alice","password":"guess"},"`+authHost+`/app":{"username":"alice","password":"s3cret"}}}`),
			want:   authHost + "/app@" + v1Digest.String()},
		{name: "auth: path-prefix key for another repository", r: insecure, ref: authHost + "/app:v1", secret: dockerConfig(t, authHost+"/other", "alice", "s3cret"), wantKind: KindUnauthorized},
		{name: "auth: dockercfg secret", r: insecure, ref: authHost + "/app:v1",
			secret: rawSecret(corev1.SecretTypeDockercfg, `{"`+authHost+`":{"username":"alice","password":"s3cret"}}`), want: authHost + "/app@" + v1Digest.String()},
		{name: "auth: wildcard key", r: &Registry{Insecure: true, Transport: redirect(authHost)}, ref: "eu.registry.test/app:v1",
			secret: dockerConfig(t, "*.registry.test", "alice", "s3cret"), want: "eu.registry.test/app@" + v1Digest.String()},
		{name: "auth: wildcard key matches one label only", r: &Registry{Insecure: true, Transport: redirect(authHost)}, ref: "a.eu.registry.test/app:v1",
			secret: dockerConfig(t, "*.registry.test", "alice", "s3cret"), wantKind: KindUnauthorized},
		{name: "auth: docker.io key for a docker hub ref", r: &Registry{Insecure: true, Transport: redirect(authHost)}, ref: "library/app:v1",
			secret: dockerConfig(t, "docker.io", "alice", "s3cret"), want: "docker.io/library/app@" + hubDigest.String()},
		{name: "auth: legacy docker hub URL key", r: &Registry{Insecure: true, Transport: redirect(authHost)}, ref: "docker.io/library/app:v1",
			secret: dockerConfig(t, "https://index.docker.io/v1/", "alice", "s3cret"), want: "docker.io/library/app@" + hubDigest.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.r.Resolve(context.Background(), tt.ref, tt.secret)
			if tt.wantKind == "" {
				if err != nil {
					t.Fatalf("Resolve(%q) error: %v", tt.ref, err)
				}
				if got != tt.want {
					t.Errorf("Resolve(%q) = %q, want %q", tt.ref, got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Resolve(%q) = %q, want a %s error", tt.ref, got, tt.wantKind)
			}
			t.Logf("error: %v", err)
			if got != "" {
				t.Errorf("Resolve(%q) returned %q alongside an error", tt.ref, got)
			}
			if k := KindOf(err); k != tt.wantKind {
				t.Errorf("KindOf(%v) = %s, want %s", err, k, tt.wantKind)
			}
			var rerr *Error
			if !errors.As(err, &rerr) || rerr.Ref != tt.ref || rerr.Err == nil {
				t.Errorf("error %#v is not an *Error for ref %q with a cause", err, tt.ref)
			}
			msg := err.Error()
			if !strings.Contains(msg, string(tt.wantKind)) || !strings.Contains(msg, tt.ref) {
				t.Errorf("error %q does not name ref %q and kind %s", msg, tt.ref, tt.wantKind)
			}
			if tt.wantErr != "" && !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error %q does not contain %q", msg, tt.wantErr)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q leaks the password", msg)
			}
		})
	}
}

func TestRegistryHeadRefusedFallsBackToGet(t *testing.T) {
	h, host := newRegistry(t)
	tests := []struct {
		name string
		ref  string
		push func(ref string) v1.Hash
	}{
		{name: "image", ref: "/app:v1", push: func(ref string) v1.Hash { return pushImage(t, ref, 1) }},
		{name: "index", ref: "/multi:v1", push: func(ref string) v1.Hash { return pushIndex(t, ref, 2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var counts methodCounter
			noHeadHost := serve(t, refuseHead(h, &counts))
			pushed := tt.push(host + tt.ref)
			repo, _, _ := strings.Cut(tt.ref, ":")

			got, err := (&Registry{Insecure: true}).Resolve(context.Background(), noHeadHost+tt.ref, nil)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if want := noHeadHost + repo + "@" + pushed.String(); got != want {
				t.Errorf("Resolve = %q, want %q", got, want)
			}
			if counts.head.Load() != 1 || counts.get.Load() != 1 {
				t.Errorf("registry saw %d HEAD and %d manifest GET requests, want 1 and 1", counts.head.Load(), counts.get.Load())
			}
		})
	}
}

func TestRegistryRetagPicksUpNewDigest(t *testing.T) {
	_, host := newRegistry(t)
	r := &Registry{Insecure: true}
	ref := host + "/os:stable"

	var seen []string
	for seed := int64(10); seed < 13; seed++ {
		pushed := pushImage(t, ref, seed)
		got, err := r.Resolve(context.Background(), ref, nil)
		if err != nil {
			t.Fatalf("Resolve after push %d: %v", seed, err)
		}
		if want := host + "/os@" + pushed.String(); got != want {
			t.Fatalf("Resolve after push %d = %q, want %q", seed, got, want)
		}
		for _, prev := range seen {
			if got == prev {
				t.Fatalf("Resolve after push %d returned an earlier digest %q", seed, got)
			}
		}
		seen = append(seen, got)
	}
}

func TestRegistryDigestRefNeedsNoRegistry(t *testing.T) {
	const dgst = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	var counts methodCounter
	_, countedHost := newRegistryCounted(t, &counts)

	closed := httptest.NewServer(http.NotFoundHandler())
	closedHost := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()

	tests := []struct {
		name string
		ref  string
		want string
	}{
		{name: "counted registry", ref: countedHost + "/app@" + dgst, want: countedHost + "/app@" + dgst},
		{name: "closed address", ref: closedHost + "/app@" + dgst, want: closedHost + "/app@" + dgst},
		{name: "tag and digest drops the tag", ref: countedHost + "/app:v1@" + dgst, want: countedHost + "/app@" + dgst},
		{name: "docker hub short name", ref: "fedora/fedora-bootc@" + dgst, want: "docker.io/fedora/fedora-bootc@" + dgst},
		{name: "docker hub library", ref: "ubuntu@" + dgst, want: "docker.io/library/ubuntu@" + dgst},
		{name: "docker hub index host", ref: "index.docker.io/library/ubuntu@" + dgst, want: "docker.io/library/ubuntu@" + dgst},
		{name: "quay", ref: "quay.io/fedora/fedora-bootc@" + dgst, want: "quay.io/fedora/fedora-bootc@" + dgst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A secret that does not parse proves it is not even read.
			got, err := (&Registry{Insecure: true}).Resolve(context.Background(), tt.ref, rawSecret(corev1.SecretTypeDockerConfigJson, "{not json"))
			if err != nil {
				t.Fatalf("Resolve(%q) error: %v", tt.ref, err)
			}
			if got != tt.want {
				t.Errorf("Resolve(%q) = %q, want %q", tt.ref, got, tt.want)
			}
		})
	}
	if n := counts.all.Load(); n != 0 {
		t.Errorf("registry saw %d requests for digest refs, want 0", n)
	}
}

// newRegistryCounted serves a registry that counts every request.
func newRegistryCounted(t *testing.T, c *methodCounter) (http.Handler, string) {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return h, serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.all.Add(1)
		h.ServeHTTP(w, r)
	}))
}

func TestRegistryCanceledContext(t *testing.T) {
	_, host := newRegistry(t)
	pushImage(t, host+"/app:v1", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Registry{Insecure: true}).Resolve(ctx, host+"/app:v1", nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve with canceled ctx: %v, want context.Canceled in the chain", err)
	}
	if k := KindOf(err); k != KindUnknown {
		t.Errorf("KindOf(canceled) = %s, want %s", k, KindUnknown)
	}
}
