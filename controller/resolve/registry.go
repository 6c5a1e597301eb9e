package resolve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/internal/pullsecret"
)

// Registry resolves references against real OCI registries with
// go-containerregistry. It is a network edge: the twin and reconciler tests
// substitute their own Resolver.
//
// A tag is resolved with a manifest HEAD request, falling back to GET when
// HEAD is refused or its answer is unusable (405, 501, missing
// Docker-Content-Digest...). Both ask for every manifest media type, so a
// multi-arch image index resolves to the digest of the index itself, not of
// a per-platform manifest: that is the digest `bootc switch` pulls by, and
// each node picks its own platform from it.
//
// Registry makes exactly one attempt and never sleeps: go-containerregistry's
// built-in retries are switched off, because a failure is reported to the
// reconciler, which requeues on the work queue's backoff.
//
// The zero value is ready to use.
type Registry struct {
	// Insecure allows plain http to every registry, for tests and
	// in-cluster registries. Note that go-containerregistry already falls
	// back to http for localhost, loopback, *.local and RFC 1918 addresses
	// even when Insecure is false.
	Insecure bool
	// Transport carries the requests; nil means remote.DefaultTransport.
	Transport http.RoundTripper
	// Timeout bounds one Resolve call, applied through the context; zero
	// means only ctx bounds it.
	Timeout time.Duration
}

var _ Resolver = (*Registry)(nil)

// Resolve implements Resolver. A digest ref is checked for syntax only and
// returned as "registry/repo@digest" (any tag dropped, Docker Hub spelled
// "docker.io") without a request. A pull secret that does not parse is a
// KindUnauthorized error whose cause starts "parse pull secret:", because
// fixing the secret is what it takes to get access; it is only parsed when
// the registry has to be asked. A nil secret means anonymous access.
func (r *Registry) Resolve(ctx context.Context, ref string, secret *corev1.Secret) (string, error) {
	var opts []name.Option
	if r.Insecure {
		opts = append(opts, name.Insecure)
	}
	parsed, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", &Error{Kind: KindInvalidReference, Ref: ref, Err: err}
	}
	if d, ok := parsed.(name.Digest); ok {
		return pinned(d.Context(), d.DigestStr()), nil
	}

	keychain := authn.NewMultiKeychain() // no keychains: anonymous everywhere
	if secret != nil {
		keychain, err = pullsecret.Keychain(*secret)
		if err != nil {
			return "", &Error{Kind: KindUnauthorized, Ref: ref, Err: err}
		}
	}

	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout) // edge: bounds real network I/O
		defer cancel()
	}
	transport := r.Transport
	if transport == nil {
		transport = remote.DefaultTransport
	}
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(keychain),
		remote.WithTransport(transport),
		remote.WithRetryPredicate(func(error) bool { return false }),
		remote.WithRetryStatusCodes(),
	}

	desc, err := describe(parsed, ropts)
	if err != nil {
		return "", &Error{Kind: classify(err), Ref: ref, Err: err}
	}
	return pinned(parsed.Context(), desc.Digest.String()), nil
}

// describe asks for the manifest descriptor with HEAD and falls back to GET only
// when HEAD failed in a way that says nothing about the image: a clear
// NotFound, Unauthorized or Unreachable from HEAD is final, which spares
// registries that count GETs against a pull-rate limit.
func describe(ref name.Reference, opts []remote.Option) (*v1.Descriptor, error) {
	desc, err := remote.Head(ref, opts...)
	if err == nil {
		return desc, nil
	}
	if classify(err) != KindUnknown || errors.Is(err, context.Canceled) {
		return nil, err
	}
	got, gerr := remote.Get(ref, opts...)
	if gerr != nil {
		return nil, gerr
	}
	return &got.Descriptor, nil
}
