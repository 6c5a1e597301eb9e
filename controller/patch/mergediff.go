package patch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mergeDiff returns the JSON merge patch (RFC 7386) that turns the JSON of
// a into the JSON of b, as a map to marshal; a and b are values of the same
// struct type. It is what jsonpatch.CreateMergePatch gives for the two
// encodings, computed field by field instead of decoding both documents:
//   - a field whose JSON differs is sent whole, or null when b omits it
//     (omitempty and empty);
//   - a nested struct without a JSON encoding of its own is diffed field by
//     field, and a map[string]string key by key (a merge patch merges
//     objects: a removed key must be sent as null);
//   - everything else (scalars, pointers, slices, types with MarshalJSON
//     such as metav1.Time) is a leaf compared by its encoding.
func mergeDiff(a, b any) (map[string]any, error) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Struct {
		return nil, fmt.Errorf("mergeDiff of %T and %T: want two values of one struct type", a, b)
	}
	return structDiff(va, vb)
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	stringMapType = reflect.TypeFor[map[string]string]()
)

// diffField is what structDiff needs of one exported field of a struct
// type, worked out once per type (fieldsOf).
type diffField struct {
	index     int
	goName    string
	name      string // JSON name; "" when the field has no plain one
	omitempty bool
	how       diffHow
}

// diffHow is how structDiff compares a field.
type diffHow int

const (
	diffLeaf      diffHow = iota // compared by its encoding
	diffStruct                   // a struct without an encoding of its own
	diffStringMap                // a map[string]string
	diffPtrStruct                // a pointer to such a struct
	diffOtherMap                 // a map of another type: not supported
	diffTime                     // a *metav1.Time, a leaf compared by sameTimeJSON
)

var timePtrType = reflect.TypeFor[*metav1.Time]()

// sameTimeJSON reports whether a and b have the same JSON encoding:
// metav1.Time encodes a zero time, as a nil pointer is encoded, as null,
// and any other as RFC 3339 in UTC to the second.
func sameTimeJSON(a, b *metav1.Time) bool {
	aNull, bNull := a == nil || a.IsZero(), b == nil || b.IsZero()
	if aNull || bNull {
		return aNull == bNull
	}
	return a.Unix() == b.Unix()
}

var diffFields sync.Map // reflect.Type -> []diffField

// fieldsOf returns the exported fields of the struct type t, in order.
func fieldsOf(t reflect.Type) []diffField {
	if fs, ok := diffFields.Load(t); ok {
		return fs.([]diffField)
	}
	var fs []diffField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		df := diffField{index: i, goName: f.Name}
		if name, omitempty, ok := jsonField(f); ok {
			df.name, df.omitempty = name, omitempty
		}
		switch {
		case f.Type == timePtrType:
			df.how = diffTime
		case f.Type.Kind() == reflect.Struct && !isLeaf(f.Type):
			df.how = diffStruct
		case f.Type == stringMapType:
			df.how = diffStringMap
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && !isLeaf(f.Type.Elem()):
			df.how = diffPtrStruct
		case f.Type.Kind() == reflect.Map:
			df.how = diffOtherMap
		}
		fs = append(fs, df)
	}
	diffFields.Store(t, fs)
	return fs
}

func structDiff(a, b reflect.Value) (map[string]any, error) {
	out := map[string]any{}
	t := a.Type()
	for _, f := range fieldsOf(t) {
		if f.name == "" {
			return nil, fmt.Errorf("mergeDiff: field %s.%s has no plain JSON name", t.Name(), f.goName)
		}
		name := f.name
		fa, fb := a.Field(f.index), b.Field(f.index)
		aOmitted := f.omitempty && isEmptyValue(fa)
		bOmitted := f.omitempty && isEmptyValue(fb)
		switch {
		case bOmitted && aOmitted:
			continue
		case bOmitted:
			out[name] = nil
			continue
		}
		switch {
		case f.how == diffStruct:
			if aOmitted {
				out[name] = fb.Interface()
				continue
			}
			sub, err := structDiff(fa, fb)
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				out[name] = sub
			}
		case f.how == diffStringMap && !aOmitted && !fa.IsNil() && !fb.IsNil():
			if sub := stringMapDiff(fa.Interface().(map[string]string), fb.Interface().(map[string]string)); len(sub) > 0 {
				out[name] = sub
			}
		case f.how == diffPtrStruct && !fb.IsNil():
			// A struct behind a pointer: set whole when it was absent,
			// otherwise diffed field by field like a struct.
			if aOmitted || fa.IsNil() {
				out[name] = fb.Interface()
				continue
			}
			sub, err := structDiff(fa.Elem(), fb.Elem())
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				out[name] = sub
			}
		case f.how == diffOtherMap:
			// Sent whole, such a value would be merged into the old one,
			// keeping keys it dropped.
			return nil, fmt.Errorf("mergeDiff: field %s.%s (%s) is not supported", t.Name(), f.goName, fa.Type())
		case f.how == diffTime:
			// The commonest leaf of a record (phaseSince, drainStartedAt,
			// ...): compared by what its encoding says, without encoding
			// it (a diff encoded both sides of each changed time).
			ta, tb := fa.Interface().(*metav1.Time), fb.Interface().(*metav1.Time)
			if !aOmitted && sameTimeJSON(ta, tb) {
				continue
			}
			jb, err := json.Marshal(tb)
			if err != nil {
				return nil, err
			}
			out[name] = json.RawMessage(jb)
		default:
			if !aOmitted && fa.Comparable() && fa.Equal(fb) {
				continue // same value, same encoding: nothing to send
			}
			ia, ib := fa.Interface(), fb.Interface()
			if !aOmitted && reflect.DeepEqual(ia, ib) {
				// Deeply equal values (pointers to equal times, equal
				// slices) have the same encoding: no need to encode them.
				continue
			}
			ja, err := json.Marshal(ia)
			if err != nil {
				return nil, err
			}
			jb, err := json.Marshal(ib)
			if err != nil {
				return nil, err
			}
			if aOmitted || !bytes.Equal(ja, jb) {
				out[name] = json.RawMessage(jb)
			}
		}
	}
	return out, nil
}

func stringMapDiff(a, b map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range b {
		if old, ok := a[k]; !ok || old != v {
			out[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// isLeaf reports whether a struct type has its own JSON encoding.
func isLeaf(t reflect.Type) bool {
	return t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
}

// jsonField returns a field's JSON name and whether it is omitempty; ok is
// false for fields mergeDiff cannot name (inline, "-", or no tag).
func jsonField(f reflect.StructField) (name string, omitempty, ok bool) {
	tag, has := f.Tag.Lookup("json")
	if !has {
		return "", false, false
	}
	// Cut, not Split: this runs for every field of every diff.
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" || name == "-" {
		return "", false, false
	}
	for opts != "" {
		var p string
		p, opts, _ = strings.Cut(opts, ",")
		if p == "omitempty" {
			omitempty = true
		}
		if p == "inline" {
			return "", false, false
		}
	}
	return name, omitempty, true
}

// isEmptyValue is encoding/json's test for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// marshalDiff is json.Marshal of a merge patch built by mergeDiff, byte for
// byte, without encoding/json's reflective walk of the map: the objects
// are map[string]any with sorted keys, the leaves nil, strings (a
// map[string]string's values), json.RawMessage (mergeDiff's own
// json.Marshal output, which json.Marshal would copy unchanged: compact,
// HTML-escaped) and values sent whole, which are marshalled as
// json.Marshal would marshal them inside the map.
func marshalDiff(doc map[string]any) ([]byte, error) {
	return appendDiff(make([]byte, 0, 256), doc)
}

func appendDiff(buf []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return appendJSONString(buf, v)
	case json.RawMessage:
		if v == nil {
			return append(buf, "null"...), nil
		}
		return append(buf, v...), nil
	case map[string]any:
		if v == nil {
			return append(buf, "null"...), nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = append(buf, '{')
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendJSONString(buf, k); err != nil {
				return nil, err
			}
			buf = append(buf, ':')
			if buf, err = appendDiff(buf, v[k]); err != nil {
				return nil, err
			}
		}
		return append(buf, '}'), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}

// appendJSONString appends s quoted as encoding/json quotes it: plain
// printable ASCII is copied; anything it escapes goes through json.Marshal.
func appendJSONString(buf []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, err := json.Marshal(s)
			if err != nil {
				return nil, err
			}
			return append(buf, b...), nil
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"'), nil
}
