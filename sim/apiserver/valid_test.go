package apiserver

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

var validSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e10`, `-1.0E-2`, `true`, `false`, `null`,
	` {"a" : [1, 2.5, "x\"y", {"b": null}], "c": true} `,
	`{"status":{"daemon":{"phase":"Staged","lastError":null},"booted":{"image":"r@sha256:1111","timestamp":"2026-01-05T00:00:00Z"}}}`,
	`{"metadata":{"annotations":{"bootroll.dev/slot":"kp","k\u00e9y":"\ud83d\ude00"}},"spec":{"unschedulable":true}}`,
	`{"a":"\/\b\f\n\r\t\\"}`, "\"\xff\xfe invalid utf-8\"",
	// Invalid:
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{a:1}`, `{"a":1 "b":2}`,
	`01`, `1.`, `.5`, `1e`, `1e+`, `-`, `+1`, `0x10`, `tru`, `nul`, `True`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`,
	"\"tab\there\"", "\"nl\nhere\"", `{"a":1}}`, `{"a":1} x`, `[1] [2]`, `"a" "b"`, `NaN`, `Infinity`,
}

// TestValidJSONAgreesWithEncodingJSON: on the seeds, on every prefix of
// them and on many random mutations of them, validJSON says what
// json.Valid says, nesting limit included.
func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", s, got, want)
		}
	}
	for _, s := range validSeeds {
		check(s)
		for i := range len(s) {
			check(s[:i])
		}
	}
	alphabet := []byte("{}[],:\" \t\n\\/ubfnrtu0123456789.eE+-aeflnrstux\x00\x1f\x7f\xc3\xa9")
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := []byte(validSeeds[r.IntN(len(validSeeds))])
		for range 1 + r.IntN(3) {
			switch op := r.IntN(3); {
			case op == 0 && len(b) > 0:
				b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
			case op == 1:
				i := r.IntN(len(b) + 1)
				b = append(b[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, b[i:]...)...)
			case len(b) > 0:
				i := r.IntN(len(b))
				b = append(b[:i], b[i+1:]...)
			}
		}
		check(string(b))
	}
	for _, depth := range []int{maxValidDepth - 1, maxValidDepth, maxValidDepth + 1} {
		check(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		check(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// mayEndPlain flags a word exactly when one of its bytes is not plain,
// whatever the byte and wherever it is in the word.
func TestMayEndPlainIsExact(t *testing.T) {
	for c := range 256 {
		for k := range 8 {
			w := []byte("aaaaaaaa")
			w[k] = byte(c)
			x := uint64(0)
			for i := 7; i >= 0; i-- {
				x = x<<8 | uint64(w[i])
			}
			if got, want := mayEndPlain(x), !plainInString[c]; got != want {
				t.Errorf("byte %#x at %d: mayEndPlain %v, want %v", c, k, got, want)
			}
		}
	}
}
