package apiserver

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// directEqual holds every struct type of serialEqual's equality
// functions, and only those, and its comparisons agree with them.
func TestDirectEqualIsSerialEqual(t *testing.T) {
	for typ := range serialEqual.Equalities {
		if _, ok := directEqual[typ]; (typ.Kind() == reflect.Struct) != ok {
			t.Errorf("%v: in directEqual %v, want %v", typ, ok, typ.Kind() == reflect.Struct)
		}
	}
	for typ := range directEqual {
		if _, ok := serialEqual.Equalities[typ]; !ok {
			t.Errorf("%v is in directEqual, not among serialEqual's functions", typ)
		}
	}
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	pairs := [][2]any{
		{metav1.NewTime(t0), metav1.NewTime(t0.Add(time.Millisecond))},
		{metav1.NewTime(t0), metav1.NewTime(t0.Add(time.Second))},
		{metav1.NewTime(t0), metav1.NewTime(t0.In(time.FixedZone("CET", 3600)))},
		{metav1.NewMicroTime(t0), metav1.NewMicroTime(t0.Add(time.Nanosecond))},
		{metav1.NewMicroTime(t0), metav1.NewMicroTime(t0.Add(time.Microsecond))},
		{resource.MustParse("4"), resource.MustParse("4000m")},
		{resource.MustParse("4"), resource.MustParse("5")},
		{resource.MustParse("1Gi"), resource.MustParse("1073741824")},
		{resource.MustParse("0.5"), resource.MustParse("500m")},
		{metav1.FieldsV1{Raw: []byte(`{"f:a":{}}`)}, metav1.FieldsV1{Raw: []byte(`{"f:a":{}}`)}},
		{metav1.FieldsV1{Raw: []byte(`{"f:a":{}}`)}, metav1.FieldsV1{Raw: []byte(`{"f:b":{}}`)}},
		{metav1.FieldsV1{}, metav1.FieldsV1{Raw: []byte{}}},
	}
	for _, p := range pairs {
		for _, ab := range [][2]any{{p[0], p[0]}, {p[0], p[1]}, {p[1], p[0]}} {
			a, b := reflect.ValueOf(ab[0]), reflect.ValueOf(ab[1])
			want := serialEqual.Equalities[a.Type()].Call([]reflect.Value{a, b})[0].Bool()
			if got, ok := directEqual[a.Type()](addressOf(a), addressOf(b), 0); !ok || got != want {
				t.Errorf("%v %v vs %v: direct %v %v, Equalities %v", a.Type(), ab[0], ab[1], got, ok, want)
			}
		}
	}
}

// plainBytes, eight bytes at a time, takes the strings the byte-by-byte
// rule takes: every byte value, at every place in a word and in the tail.
func TestPlainBytesByteByByte(t *testing.T) {
	slow := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 19; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := make([]byte, n+2)
				for i := range b {
					b[i] = 'a' + byte(i%26)
				}
				b[0], b[n+1] = '"', '"'
				b[1+pos] = byte(c)
				got, ok := plainBytes(b)
				if want := slow(b[1 : n+1]); ok != want || (ok && string(got) != string(b[1:n+1])) {
					t.Fatalf("plainBytes(%q) = %q, %v; want %v", b, got, ok, want)
				}
			}
		}
	}
}
