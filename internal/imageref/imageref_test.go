package imageref

import (
	"strings"
	"testing"
)

var (
	hexA = strings.Repeat("a", 64)
	digA = "sha256:" + hexA
)

// TestDigest is the table every caller used to answer on its own
// (controller.DigestOf, resolve.Digest, nodedaemon.ImageDigest, bootc's
// matches, the twin's digestOf and repository, the invariant's digestOf,
// the scenario loader's strings.Cut): they disagreed on the malformed rows.
func TestDigest(t *testing.T) {
	tests := []struct {
		name, ref, want string // want: Digest(ref); IsDigest(ref) == (want != "")
	}{
		{"digest reference", "quay.io/acme/os@" + digA, digA},
		{"registry with port", "localhost:5000/os@" + digA, digA},
		{"docker hub short name", "os@" + digA, digA},
		{"tag and digest", "quay.io/acme/os:42@" + digA, digA},
		{"tag and digest, port", "localhost:5000/acme/os:42@" + digA, digA},
		{"sha512", "quay.io/acme/os@sha512:" + strings.Repeat("b", 128), "sha512:" + strings.Repeat("b", 128)},
		{"empty", "", ""},
		{"tag only", "quay.io/acme/os:42", ""},
		{"no @", "quay.io/acme/os", ""},
		{"bare digest", digA, ""},
		{"empty digest", "quay.io/acme/os@", ""},
		{"short hex", "quay.io/acme/os@sha256:abc", ""},
		{"long hex", "quay.io/acme/os@" + digA + "a", ""},
		{"upper-case hex", "quay.io/acme/os@sha256:" + strings.ToUpper(hexA), ""},
		{"missing algorithm", "quay.io/acme/os@" + hexA, ""},
		{"missing algorithm, colon", "quay.io/acme/os@:" + hexA, ""},
		{"unknown algorithm", "quay.io/acme/os@md5:" + hexA[:32], ""},
		{"two @", "quay.io/acme/os@" + digA + "@" + digA, ""},
		{"no repository", "@" + digA, ""},
		{"upper-case repository", "quay.io/Acme/os@" + digA, ""},
		// pkg/name takes "https:" for a registry here; the CRD's pattern
		// and the scenario loader reject a scheme before this is reached.
		{"scheme (accepted by pkg/name)", "https://quay.io/acme/os@" + digA, digA},
		{"space", "quay.io/acme/os @" + digA, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Digest(tt.ref); got != tt.want {
				t.Errorf("Digest(%q) = %q, want %q", tt.ref, got, tt.want)
			}
			if got, want := IsDigest(tt.ref), tt.want != ""; got != want {
				t.Errorf("IsDigest(%q) = %v, want %v", tt.ref, got, want)
			}
			_, err := ParseDigest(tt.ref)
			if (err == nil) != (tt.want != "") {
				t.Errorf("ParseDigest(%q) error = %v, want error %v", tt.ref, err, tt.want == "")
			}
			if err != nil && !strings.Contains(err.Error(), "\""+tt.ref+"\"") {
				t.Errorf("ParseDigest(%q) error %q does not name the value", tt.ref, err)
			}
		})
	}
}

func TestWithDigest(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"quay.io/acme/os:42", "quay.io/acme/os@" + digA},
		{"quay.io/acme/os", "quay.io/acme/os@" + digA},
		{"localhost:5000/os", "localhost:5000/os@" + digA},
		{"localhost:5000/os:1.0", "localhost:5000/os@" + digA},
		{"os:1", "os@" + digA}, // spelled as given: no docker.io/library added
		{"quay.io/acme/os:42@sha256:" + strings.Repeat("b", 64), "quay.io/acme/os@" + digA},
		{"quay.io/acme/os@sha256:" + strings.Repeat("b", 64), "quay.io/acme/os@" + digA},
		{"", ""},
		{"quay.io/Acme/os:1", ""},
		{"quay.io/acme/os:", ""},
	}
	for _, tt := range tests {
		got, err := WithDigest(tt.ref, digA)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("WithDigest(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "\""+tt.ref+"\"") {
			t.Errorf("WithDigest(%q) error %q does not name the value", tt.ref, err)
		}
	}
	if _, err := WithDigest("quay.io/acme/os:1", "sha256:abc"); err == nil {
		t.Errorf("WithDigest with a short digest: no error")
	}
}

func TestParse(t *testing.T) {
	for _, ref := range []string{"quay.io/acme/os:42", "os", "localhost:5000/os@" + digA, "quay.io/acme/os:42@" + digA} {
		if _, err := Parse(ref); err != nil {
			t.Errorf("Parse(%q): %v", ref, err)
		}
	}
	for _, ref := range []string{"", "quay.io/Acme/os", "quay.io/acme/os@sha256:abc", "https://quay.io/os"} {
		_, err := Parse(ref)
		if err == nil {
			t.Errorf("Parse(%q): no error", ref)
		} else if !strings.Contains(err.Error(), "\""+ref+"\"") {
			t.Errorf("Parse(%q) error %q does not name the value", ref, err)
		}
	}
}

// A one-letter repository: the CRD's pattern accepts it; so must we.
func TestShortRepository(t *testing.T) {
	for _, ref := range []string{"registry.example/a@" + digA, "r/os@" + digA, "a@" + digA} {
		if !IsDigest(ref) {
			t.Errorf("IsDigest(%q) = false", ref)
		}
	}
}
