package apiserver

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
)

// fieldsV1Of encodes what json.Marshal encodes from the maps
// manageAnnotations built.
func TestFieldsV1OfAsMarshal(t *testing.T) {
	for _, keys := range [][]string{
		{unschedulableField},
		{"bootroll.dev/slot"},
		{"b", "a", unschedulableField, "karpenter.sh/do-not-disrupt"},
		{"x<y>&z", "quote\"d", "back\\slash", "tab\tkey", "é", "\xff", unschedulableField},
	} {
		set := map[string]any{}
		annotations := map[string]struct{}{}
		for _, k := range keys {
			if k == unschedulableField {
				set["f:spec"] = map[string]any{"f:unschedulable": struct{}{}}
				continue
			}
			annotations["f:"+k] = struct{}{}
		}
		if len(annotations) > 0 {
			set["f:metadata"] = map[string]any{"f:annotations": annotations}
		}
		want, _ := json.Marshal(set)
		if got := fieldsV1Of(keys); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", keys, got, want)
		}
	}
}

// parseRV agrees with strconv.ParseUint(rv, 10, 64).
func TestParseRVAsParseUint(t *testing.T) {
	for _, rv := range []string{"", "0", "7", "1234", "007", "12a", "-1", "+1", "1_000", " 1", "9999999999999999999",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "1234567890123456789"} {
		want, err := strconv.ParseUint(rv, 10, 64)
		if got, ok := parseRV(rv); ok != (err == nil) || (ok && got != want) {
			t.Errorf("parseRV(%q) = %d, %v; ParseUint %d, %v", rv, got, ok, want, err)
		}
	}
}

// decodeStrings decodes what json.Unmarshal decodes into a zero slice, or
// declines.
func TestDecodeStringsAsUnmarshal(t *testing.T) {
	type named string
	for _, data := range []string{`[]`, `[ ]`, `["a"]`, `["a","b"]`, `[ "a" , "b" ]`, `["a\\"b"]`, `["é"]`, `[null]`, `["a",1]`, `[""]`,
		`["1","2","3","4","5","6","7","8","9"]`, `"a"`, `{}`} {
		for _, typ := range []reflect.Type{reflect.TypeFor[[]string](), reflect.TypeFor[[]named]()} {
			want := reflect.New(typ)
			werr := json.Unmarshal([]byte(data), want.Interface())
			got := reflect.New(typ)
			if !decodeStrings(got.Elem(), []byte(data)) {
				if !got.Elem().IsNil() {
					t.Errorf("%s into %v: declined but set %#v", data, typ, got.Elem())
				}
				continue
			}
			if werr != nil || !reflect.DeepEqual(got.Elem().Interface(), want.Elem().Interface()) || got.Elem().IsNil() != want.Elem().IsNil() {
				t.Errorf("%s into %v: %#v, json %#v (%v)", data, typ, got.Elem(), want.Elem(), werr)
			}
		}
	}
}
