// Package imageref is the one place bootroll parses OCI image references.
// It is built on github.com/google/go-containerregistry/pkg/name and
// imports nothing else of bootroll, so that every package may use it: the
// controller, the node daemon, the twin and the invariant checker, which
// must not import the controller or the daemon.
//
// A digest reference is "[registry/]repository[:tag]@algorithm:hex", for
// example "quay.io/fedora/fedora-bootc@sha256:<64 hex>". The digest must be
// well formed as go-digest checks it: a known algorithm (sha256, sha384,
// sha512) and the right number of lower-case hex digits. A tag before the
// "@" is allowed and ignored, as containers/image and the kubelet do.
// Anything else (no "@", a bare digest, upper-case hex, a short or missing
// algorithm, two "@") is not a digest reference.
package imageref

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
)

// Parse parses ref as a tag or digest reference. The error names ref.
func Parse(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	return r, nil
}

// ParseDigest parses ref as a digest reference. The error names ref.
func ParseDigest(ref string) (name.Digest, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image reference %q is not a digest reference: %w", ref, err)
	}
	return d, nil
}

// Digest returns the digest ("sha256:...") of the digest reference ref, or
// "" when ref is not a valid digest reference.
func Digest(ref string) string {
	if d, ok := memo.Load(ref); ok {
		return d.(string)
	}
	out := ""
	if d, err := name.NewDigest(ref); err == nil {
		out = d.DigestStr()
	}
	if memoSize.Load() < memoMax {
		if _, loaded := memo.LoadOrStore(ref, out); !loaded {
			memoSize.Add(1)
		}
	}
	return out
}

// IsDigest reports whether ref is a valid digest reference.
func IsDigest(ref string) bool { return Digest(ref) != "" }

// memo remembers Digest's answers: the controller, the daemon and the
// twin ask about the same few references (a pool's target, the images its
// nodes boot) on every reconcile, and a full parse was 5-10% of a twin
// run. It is bounded (memoMax answers; past that Digest parses every
// time), so references read from objects cannot grow it without limit.
var (
	memo     sync.Map
	memoSize atomic.Int64
)

const memoMax = 4096

// Repository returns ref without its tag and digest, spelled as in ref
// (no default registry or "library/" added): "localhost:5000/os:1" gives
// "localhost:5000/os".
func Repository(ref string) (string, error) {
	r, err := Parse(ref)
	if err != nil {
		return "", err
	}
	base := ref
	if d, ok := r.(name.Digest); ok {
		base = strings.TrimSuffix(ref, "@"+d.DigestStr())
	}
	// A tag is a ':' after the last '/' (a ':' before it is a registry
	// port); base parsed above, so what follows it is a valid tag.
	if i := strings.LastIndexByte(base, ':'); i > strings.LastIndexByte(base, '/') {
		base = base[:i]
	}
	return base, nil
}

// WithDigest pins ref (a tag or digest reference) to digest: its
// repository, spelled as in ref, "@" digest. Any tag is dropped.
func WithDigest(ref, digest string) (string, error) {
	repo, err := Repository(ref)
	if err != nil {
		return "", err
	}
	pinned := repo + "@" + digest
	if _, err := ParseDigest(pinned); err != nil {
		return "", err
	}
	return pinned, nil
}
