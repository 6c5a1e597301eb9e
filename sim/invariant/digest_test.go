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

// digestOf reads the tail of a reference; it agrees with the definition
// (the part after the last '@', when that is "sha256:" and 64 lower-case
// hex digits, and the '@' is not the first byte) for every byte at every
// place of the hex digits and of the prefix.
func TestDigestOfReadsTheDefinition(t *testing.T) {
	def := func(ref string) string {
		i := strings.LastIndexByte(ref, '@')
		if i <= 0 {
			return ref
		}
		d := ref[i+1:]
		hex, ok := strings.CutPrefix(d, "sha256:")
		if !ok || len(hex) != 64 {
			return ref
		}
		for j := 0; j < len(hex); j++ {
			if c := hex[j]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return ref
			}
		}
		return d
	}
	hex := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	refs := []string{"@sha256:" + hex, "r@sha256:" + hex, "a@b@sha256:" + hex, "r@sha256:" + hex + "0", "r@sha256:" + hex[1:],
		"r@sha256@" + hex, "r@sha256:" + hex + "@", "r@@sha256:" + hex, "rsha256:" + hex, "sha256:" + hex}
	for pos := 0; pos < 64+8; pos++ {
		for c := 0; c < 256; c++ {
			b := []byte("repo/os:1@sha256:" + hex)
			b[len(b)-1-pos] = byte(c)
			refs = append(refs, string(b))
		}
	}
	for _, ref := range refs {
		if got, want := digestOf(ref), def(ref); got != want {
			t.Errorf("digestOf(%q) = %q, want %q", ref, got, want)
		}
	}
}
