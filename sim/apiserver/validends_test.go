package apiserver

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// validJSONEnds records the end of every string (keys too), object and
// array of a valid document, as skipValue finds it, and nothing at other
// places.
func TestValidJSONEndsAsSkipValue(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `""`, `"a\"b\\"`, `  {"a" : [1, "x", {"b":null}] , "c":{} } `,
		`{"metadata":{"resourceVersion":"1008"},"status":{"phase":"Pending","rollout":{"phaseSince":"2026-01-05T00:00:00Z","targetImage":"registry.example/fedora-bootc@sha256:71fc"}}}`,
		`{"status":{"booted":{"digest":"sha256:11","image":"r@sha256:11","timestamp":null,"version":null},"daemon":{"bootID":"w-1","lastError":null,"observedGeneration":1,"phase":"Staging"},"rollbackImage":null,"staged":null}}`,
		`{"a":[[],[[]],{"b":[{"c":"]}\"["}]}],"d\\":"e\\\\","f":-1.5e3,"g":true,"h":false}`,
		`{"k\u00e9y":"v\u0041","x":["\n",{"y":[]}]}`,
	}
	for _, d := range docs {
		b := []byte(d)
		ends := make([]int, len(b))
		for i := range ends {
			ends[i] = -1
		}
		if !validJSONEnds(b, ends) {
			t.Fatalf("%s: not valid", d)
		}
		starts := map[int]bool{}
		var walk func(i int) int
		walk = func(i int) int {
			i = skipWS(b, i)
			switch b[i] {
			case '"':
				starts[i] = true
			case '{', '[':
				starts[i] = true
				end := skipValue(b, i)
				j := skipWS(b, i+1)
				for j < end-1 {
					if b[i] == '{' {
						starts[j] = true // the key
						j = skipWS(b, skipString(b, j))
						j++ // ':'
					}
					j = skipWS(b, walk(j))
					if b[j] == ',' {
						j++
					}
					j = skipWS(b, j)
				}
			}
			return skipValue(b, skipWS(b, i))
		}
		walk(0)
		for i, e := range ends {
			switch {
			case starts[i] && e != skipValue(b, i):
				t.Errorf("%s: at %d ends %d, skipValue %d", d, i, e, skipValue(b, i))
			case !starts[i] && e != -1:
				t.Errorf("%s: at %d, not the start of a string or container, ends %d", d, i, e)
			}
		}
	}
	if validJSONEnds([]byte(`{"a":}`), make([]int, 6)) {
		t.Error(`{"a":} valid`)
	}
}

// A part of the patch being applied is found in it; another slice, even
// with the same bytes, is not.
func TestPatcherBase(t *testing.T) {
	var p patcher
	doc := []byte(` {"a":{"b":"c"}}`)[1:]
	if !p.validate(doc) {
		t.Fatal("not valid")
	}
	if got := p.base(doc[5:14]); got != 5 {
		t.Errorf("base of a part = %d, want 5", got)
	}
	if got := p.base(doc); got != 0 {
		t.Errorf("base of the document = %d, want 0", got)
	}
	if got := p.base([]byte(`{"b":"c"}`)); got != -1 {
		t.Errorf("base of a copy = %d, want -1", got)
	}
	if got := p.base(nil); got != -1 {
		t.Errorf("base of nil = %d, want -1", got)
	}
	if end := p.skip(doc[5:14], 5, 0); end != 9 {
		t.Errorf("skip = %d, want 9", end)
	}
}

func TestUIDOfAsSprintf(t *testing.T) {
	for _, n := range []uint64{0, 1, 9, 10, 1234567, 12345678, 123456789, 1<<64 - 1} {
		if got, want := string(uidOf(n)), fmt.Sprintf("uid-%08d", n); got != want {
			t.Errorf("uidOf(%d) = %q, want %q", n, got, want)
		}
	}
}

// serialiseTimes leaves a metav1.Time as Truncate(time.Second) gives it,
// to the representation: with or without a monotonic reading, fractions
// of a second, a zone.
func TestSerialiseTimeAsTruncate(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for _, tm := range []time.Time{{}, t0, t0.Add(time.Millisecond), t0.In(time.FixedZone("CET", 3600)), time.Now(), time.Now().Truncate(time.Second).Add(0), t0.Local()} {
		obj := &metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(tm)}
		serialiseTimes(obj)
		if want := tm.Truncate(time.Second); obj.CreationTimestamp.Time != want {
			t.Errorf("%v: serialised %#v, want %#v", tm, obj.CreationTimestamp.Time, want)
		}
	}
}

// setGVK sets what SetGroupVersionKind sets, for a core and a grouped kind.
func TestSetGVKAsSetGroupVersionKind(t *testing.T) {
	for _, gvk := range []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Node"), v1alpha1.GroupVersion.WithKind("BootcNode")} {
		k := newKind(gvk, gvk.GroupVersion().WithKind(gvk.Kind+"List"), false, nil)
		var got, want metav1.TypeMeta
		pm := &metav1.PartialObjectMetadata{}
		k.setGVK(pm)
		got = pm.TypeMeta
		want.SetGroupVersionKind(gvk)
		if got != want {
			t.Errorf("%v: setGVK %+v, SetGroupVersionKind %+v", gvk, got, want)
		}
	}
}

// notPlain flags first the first byte that is not plain (a quote, a
// backslash, below 0x20), whatever the bytes after it, and nothing in
// eight plain bytes.
func TestNotPlainLowestFlagIsFirst(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			for _, above := range []byte{0, 0x1f, '"', '\\', 'a', 0xff} {
				var w [8]byte
				for i := range w {
					w[i] = 'a' + byte(i)
					if i > pos {
						w[i] = above
					}
				}
				w[pos] = byte(c)
				m := notPlain(binary.LittleEndian.Uint64(w[:]))
				first := 8
				for i, b := range w {
					if !plain(b) {
						first = i
						break
					}
				}
				got := 8
				if m != 0 {
					got = bits.TrailingZeros64(m) / 8
				}
				if got != first {
					t.Fatalf("%q: first flagged %d, first not plain %d", w, got, first)
				}
			}
		}
	}
}
