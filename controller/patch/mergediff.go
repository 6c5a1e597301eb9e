package patch

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appendMergeDiff appends to buf the JSON merge patch (RFC 7386) that
// turns the JSON of a into the JSON of b, an object ("{}" when they
// encode alike); a and b are values of the same struct type. It is what
// jsonpatch.CreateMergePatch gives for the two encodings, computed field by
// field instead of decoding both documents:
//   - a field whose JSON differs is sent whole, or null when b omits it
//     (omitempty and empty);
//   - a nested struct without a JSON encoding of its own is diffed field by
//     field, and a map[string]string key by key (a merge patch merges
//     objects: a removed key must be sent as null);
//   - everything else (scalars, pointers, slices, types with MarshalJSON
//     such as metav1.Time) is a leaf compared by its encoding.
//
// The bytes are those json.Marshal gives for the patch built as a map of
// maps: each object's members in the order of their names, leaves as
// json.Marshal encodes them (TestMergeDiffBytes). Written as it is
// diffed, the patch needs no maps to be built, walked and sorted.
func appendMergeDiff(buf []byte, a, b any) ([]byte, error) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Struct {
		return nil, fmt.Errorf("mergeDiff of %T and %T: want two values of one struct type", a, b)
	}
	buf, wrote, err := appendObjectDiff(buf, va, vb)
	if err != nil {
		return nil, err
	}
	if !wrote {
		buf = append(buf, "{}"...)
	}
	return buf, nil
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	stringMapType = reflect.TypeFor[map[string]string]()
)

// diffField is what appendMembers needs of one exported field of a
// struct type, worked out once per type (fieldsOf).
type diffField struct {
	index     int
	goName    string
	name      string // JSON name; "" when the field has no plain one
	key       []byte // the name as a JSON string and a colon
	omitempty bool
	how       diffHow
}

// diffHow is how appendMembers compares a field.
type diffHow int

const (
	diffLeaf      diffHow = iota // compared by its encoding
	diffStruct                   // a struct without an encoding of its own
	diffStringMap                // a map[string]string
	diffPtrStruct                // a pointer to such a struct
	diffOtherMap                 // a map of another type: not supported
	diffTime                     // a *metav1.Time, a leaf compared by sameTimeJSON
	diffString                   // a string kind without an encoding of its own
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

// fieldsOf returns the exported fields of the struct type t, in the order
// of their JSON names (json.Marshal's order of a map's keys).
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
			df.key, _ = appendJSONString(nil, name)
			df.key = append(df.key, ':')
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
		case f.Type.Kind() == reflect.String && !encodesItself(f.Type):
			df.how = diffString
		}
		fs = append(fs, df)
	}
	slices.SortStableFunc(fs, func(x, y diffField) int { return strings.Compare(x.name, y.name) })
	diffFields.Store(t, fs)
	return fs
}

// appendObjectDiff appends the diff of the structs a and b as an object;
// when nothing differs it appends nothing and wrote is false.
func appendObjectDiff(buf []byte, a, b reflect.Value) (_ []byte, wrote bool, err error) {
	start := len(buf)
	buf, wrote, err = appendMembers(append(buf, '{'), a, b, true)
	if err != nil || !wrote {
		return buf[:start], false, err
	}
	return append(buf, '}'), true, nil
}

// appendMembers appends the members of the diff of the structs a and b,
// each after a comma unless it is the first of its object (first, and
// none appended before it); wrote says whether it appended any.
func appendMembers(buf []byte, a, b reflect.Value, first bool) (_ []byte, wrote bool, err error) {
	t := a.Type()
	for _, f := range fieldsOf(t) {
		if f.name == "" {
			return nil, false, fmt.Errorf("mergeDiff: field %s.%s has no plain JSON name", t.Name(), f.goName)
		}
		fa, fb := a.Field(f.index), b.Field(f.index)
		aOmitted := f.omitempty && isEmptyValue(fa)
		bOmitted := f.omitempty && isEmptyValue(fb)
		if aOmitted && bOmitted {
			continue
		}
		member := len(buf)
		if !first || wrote {
			buf = append(buf, ',')
		}
		buf = append(buf, f.key...)
		value := len(buf)
		if buf, err = appendFieldDiff(buf, t, f, fa, fb, aOmitted, bOmitted); err != nil {
			return nil, false, err
		}
		if len(buf) == value {
			buf = buf[:member] // nothing to send
			continue
		}
		wrote = true
	}
	return buf, wrote, nil
}

// appendFieldDiff appends what the patch sends for the field f, from fa
// to fb; nothing when the field's JSON is the same.
func appendFieldDiff(buf []byte, t reflect.Type, f diffField, fa, fb reflect.Value, aOmitted, bOmitted bool) ([]byte, error) {
	if bOmitted {
		return append(buf, "null"...), nil
	}
	switch {
	case f.how == diffStruct:
		if aOmitted {
			return appendJSON(buf, fb.Interface())
		}
		buf, _, err := appendObjectDiff(buf, fa, fb)
		return buf, err
	case f.how == diffStringMap && !aOmitted && !fa.IsNil() && !fb.IsNil():
		return appendStringMapDiff(buf, fa.Interface().(map[string]string), fb.Interface().(map[string]string))
	case f.how == diffPtrStruct && !fb.IsNil():
		// A struct behind a pointer: set whole when it was absent,
		// otherwise diffed field by field like a struct.
		if aOmitted || fa.IsNil() {
			return appendJSON(buf, fb.Interface())
		}
		buf, _, err := appendObjectDiff(buf, fa.Elem(), fb.Elem())
		return buf, err
	case f.how == diffOtherMap:
		// Sent whole, such a value would be merged into the old one,
		// keeping keys it dropped.
		return nil, fmt.Errorf("mergeDiff: field %s.%s (%s) is not supported", t.Name(), f.goName, fa.Type())
	case f.how == diffString && utf8.ValidString(fa.String()) && utf8.ValidString(fb.String()):
		// The commonest leaf of a record (phase, reason, message):
		// two strings of valid UTF-8 encode alike exactly when they are
		// equal. (encoding/json writes invalid bytes as U+FFFD: other
		// strings are compared by their encoding below.)
		if !aOmitted && fa.String() == fb.String() {
			return buf, nil
		}
		return appendJSONString(buf, fb.String())
	case f.how == diffTime:
		// The commonest leaf of a record (phaseSince, drainStartedAt,
		// ...): compared by what its encoding says, without encoding
		// it (a diff encoded both sides of each changed time).
		ta, tb := fa.Interface().(*metav1.Time), fb.Interface().(*metav1.Time)
		if !aOmitted && sameTimeJSON(ta, tb) {
			return buf, nil
		}
		return appendJSON(buf, tb)
	}
	if !aOmitted && fa.Comparable() && fa.Equal(fb) {
		return buf, nil // same value, same encoding: nothing to send
	}
	ia, ib := fa.Interface(), fb.Interface()
	if !aOmitted && reflect.DeepEqual(ia, ib) {
		// Deeply equal values (pointers to equal times, equal slices)
		// have the same encoding: no need to encode them.
		return buf, nil
	}
	jb, err := json.Marshal(ib)
	if err != nil {
		return nil, err
	}
	if !aOmitted {
		ja, err := json.Marshal(ia)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(ja, jb) {
			return buf, nil
		}
	}
	return append(buf, jb...), nil
}

// appendStringMapDiff appends the diff of two map[string]string as an
// object, its keys sorted: the keys b adds or changes with their new
// values, the keys it drops as null. Nothing when the maps are equal.
func appendStringMapDiff(buf []byte, a, b map[string]string) ([]byte, error) {
	var keys []string
	for k, v := range b {
		if old, ok := a[k]; !ok || old != v {
			keys = append(keys, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return buf, nil
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
		v, ok := b[k]
		if !ok {
			buf = append(buf, "null"...)
		} else if buf, err = appendJSONString(buf, v); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// appendJSON appends json.Marshal's encoding of v.
func appendJSON(buf []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

// encodesItself reports whether encoding/json encodes a value of type t by
// its own MarshalJSON or MarshalText.
func encodesItself(t reflect.Type) bool {
	for _, t := range []reflect.Type{t, reflect.PointerTo(t)} {
		if t.Implements(marshalerType) || t.Implements(textMarshalerType) {
			return true
		}
	}
	return false
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
