package patch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The merge patch as the controller built it before it wrote the JSON as
// it diffed (appendMergeDiff): a map of maps for json.Marshal. Kept as the
// test's oracle of the bytes (TestMergeDiffBytes); it had been tested
// against jsonpatch.CreateMergePatch as appendMergeDiff now is.

// mapDiff is the patch of mergeDiff's rules as a map for json.Marshal.
func mapDiff(a, b any) (map[string]any, error) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Struct {
		return nil, fmt.Errorf("mapDiff of %T and %T: want two values of one struct type", a, b)
	}
	return mapStructDiff(va, vb)
}

func mapStructDiff(a, b reflect.Value) (map[string]any, error) {
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
			sub, err := mapStructDiff(fa, fb)
			if err != nil {
				return nil, err
			}
			if len(sub) > 0 {
				out[name] = sub
			}
		case f.how == diffStringMap && !aOmitted && !fa.IsNil() && !fb.IsNil():
			if sub := mapStringMapDiff(fa.Interface().(map[string]string), fb.Interface().(map[string]string)); len(sub) > 0 {
				out[name] = sub
			}
		case f.how == diffPtrStruct && !fb.IsNil():
			// A struct behind a pointer: set whole when it was absent,
			// otherwise diffed field by field like a struct.
			if aOmitted || fa.IsNil() {
				out[name] = fb.Interface()
				continue
			}
			sub, err := mapStructDiff(fa.Elem(), fb.Elem())
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
		case f.how == diffString && utf8.ValidString(fa.String()) && utf8.ValidString(fb.String()):
			// The commonest leaf of a record (phase, reason, message):
			// two strings of valid UTF-8 encode alike exactly when they
			// are equal, and b is sent as a string, which marshalDiff
			// encodes as json.Marshal does. (encoding/json writes invalid
			// bytes as U+FFFD: other strings are compared by their
			// encoding below.)
			if !aOmitted && fa.String() == fb.String() {
				continue
			}
			out[name] = fb.String()
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

func mapStringMapDiff(a, b map[string]string) map[string]any {
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
