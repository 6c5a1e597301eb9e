package invariant

import (
	"strings"
	"testing"

	"github.com/bootroll/bootroll/internal/imageref"
)

// The checker reads digests with imageref, as the controller and the daemon
// do; it differs only in taking a string that is no digest reference (a
// bare digest, a malformed reference) for itself, so that it equals no
// other image's digest.
func TestDigestOfAgreesWithImageref(t *testing.T) {
	hex := strings.Repeat("a", 64)
	for _, ref := range []string{
		"r/os@sha256:" + hex, "r/os:1@sha256:" + hex, "sha256:" + hex, "", "r/os:1",
		"r/os@sha256:abc", "r/os@sha256:" + strings.ToUpper(hex), "r/os@" + hex,
	} {
		want := imageref.Digest(ref)
		if want == "" {
			want = ref
		}
		if got := digestOf(ref); got != want {
			t.Errorf("digestOf(%q) = %q, want %q", ref, got, want)
		}
	}
}
