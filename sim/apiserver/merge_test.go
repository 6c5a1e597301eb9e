package apiserver

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

func randJSON(r *rand.Rand, depth int, nulls bool) any {
	n := r.IntN(8)
	if depth <= 0 && n >= 5 {
		n = r.IntN(5)
	}
	switch n {
	case 0:
		if nulls {
			return nil
		}
		return "x"
	case 1:
		return r.IntN(3)
	case 2:
		return []string{"a", "b\\\"<&", "c"}[r.IntN(3)]
	case 3:
		return r.IntN(2) == 0
	case 4:
		return 1.5
	case 5, 6:
		m := map[string]any{}
		for range r.IntN(4) {
			m[[]string{"a", "b", "c", "A", "k\"<>", "d"}[r.IntN(6)]] = randJSON(r, depth-1, nulls)
		}
		return m
	default:
		var a []any
		for range r.IntN(3) {
			a = append(a, randJSON(r, depth-1, nulls))
		}
		return a
	}
}

func TestMergePatchMatchesJSONPatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fixed := [][2]string{
		{`{"a":1}`, `{"a":null}`},
		{`{"a":{"b":1}}`, `{"a":[{"x":null}]}`},
		{`{"a":1}`, `{"a":[{"x":null},null]}`},
		{`{}`, `{"a":{"b":null,"c":{"d":null}}}`},
		{`{"a":{"b":1}}`, ` { "a" : { "b" : null , "c" : 2 } , "a" : {"e": 3} } `},
		{`{"a\u0026":1,"b":"\u003c"}`, `{"a\u0026":2}`},
	}
	for i := range 20000 {
		var doc, patch []byte
		if i < len(fixed) {
			doc, patch = []byte(fixed[i][0]), []byte(fixed[i][1])
		} else {
			d := map[string]any{}
			for range r.IntN(6) {
				d[strconv.Itoa(r.IntN(4))] = randJSON(r, 3, false)
			}
			p := map[string]any{}
			for range r.IntN(6) {
				p[strconv.Itoa(r.IntN(4))] = randJSON(r, 3, true)
			}
			doc, _ = json.Marshal(d)
			patch, _ = json.Marshal(p)
		}
		want, err := jsonpatch.MergePatch(doc, patch)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := mergePatch(doc, patch, nil)
		if !ok {
			t.Fatalf("mergePatch(%s, %s) not ok", doc, patch)
		}
		if !reflect.DeepEqual(decodeAny(t, got), decodeAny(t, want)) {
			t.Fatalf("mergePatch(%s, %s) = %s, want %s", doc, patch, got, want)
		}
	}
	for _, p := range []string{`null`, `[1]`, `"x"`, `{"a":`, ``, `{}x`} {
		if _, ok := mergePatch([]byte(`{"a":1}`), []byte(p), nil); ok {
			t.Errorf("mergePatch accepted %q", p)
		}
	}
}

func TestSkipString(t *testing.T) {
	for _, s := range []string{"", `\`, `\\`, `"`, `a\"b`, `\\"`, `\"\\`, "\u00e9\x01\n", `\u0022`} {
		b, _ := json.Marshal(s)
		in := append(append([]byte{}, b...), `,"x\\"}`...)
		if got := skipString(in, 0); got != len(b) {
			t.Errorf("skipString(%s) = %d, want %d", in, got, len(b))
		}
	}
	if got := skipString([]byte(`"ab\"`), 0); got != 5 {
		t.Errorf("skipString of an unterminated string = %d, want 5", got)
	}
}
