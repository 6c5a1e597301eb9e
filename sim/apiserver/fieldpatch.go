package apiserver

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldMask is a set of top-level fields of a typed kind's Go type, by
// index.
type fieldMask uint64

// allFields is every field: what a write that may change any of them
// compares.
const allFields = ^fieldMask(0)

// has reports whether m holds field i; allFields holds every field,
// including none (-1), as for unstructured kinds.
func (m fieldMask) has(i int) bool {
	return m == allFields || (i >= 0 && m&(1<<uint(i)) != 0)
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// patchFieldsOf returns the indexes of the top-level fields of the struct
// type t that encoding/json encodes and decodes on their own under an exact
// name (metadata, spec, status, ...), by JSON name; nil when t is encoded
// as a whole (a custom marshaler) or has too many fields for a fieldMask.
// The members of inline embedded structs (apiVersion and kind of TypeMeta)
// are not among them, nor are fields with the string or omitzero options.
func patchFieldsOf(t reflect.Type) map[string]int {
	if marshalsItself(t) || t.NumField() > 64 {
		return nil
	}
	out := map[string]int{}
	seen := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || !plainName(name) {
			if f.Anonymous || name != "" {
				continue
			}
			name = f.Name
		}
		plain := true
		for o := range strings.SplitSeq(opts, ",") {
			switch o {
			case "", "inline":
			case "omitempty":
				// mergeFields encodes an empty field that the whole
				// document leaves out: fine unless it marshals itself.
				if f.Type.Kind() != reflect.Struct && marshalsItself(f.Type) {
					plain = false
				}
			default: // string, omitzero, ...
				plain = false
			}
		}
		if seen[name]++; plain {
			out[name] = i
		}
	}
	for name, n := range seen {
		if n > 1 {
			delete(out, name) // encoding/json would see a conflict
		}
	}
	return out
}

// marshalsItself reports whether encoding/json leaves encoding or decoding
// values of type t to methods of t.
func marshalsItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	for _, i := range []reflect.Type{jsonMarshaler, jsonUnmarshaler, textMarshaler, textUnmarshaler} {
		if pt.Implements(i) {
			return true
		}
	}
	return false
}

// plainName reports whether name is a JSON field name that encoding/json
// takes from a tag as it is.
func plainName(name string) bool {
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return name != ""
}

// mergeFields applies the JSON merge patch data to the object of e field
// by field: the result is a shallow copy of the stored object in which each
// top-level field the patch names is replaced by what decoding the whole
// patched document would give it (the stored field encoded alone, the patch
// member merged into it as mergePatch does, decoded into a zero value), and
// the others are shared with the stored object. changed is the set of
// fields replaced. ok is false when the patch is not a JSON object naming
// each member once by the exact name of such a field, or a field does not
// encode or decode: the caller then takes the full path, which gives the
// errors.
func (k *kind) mergeFields(e *entry, data []byte) (out client.Object, changed fieldMask, ok bool) {
	if k.patchFields == nil {
		return nil, 0, false
	}
	p := bytes.TrimLeft(data, " \t\r\n")
	if len(p) == 0 || p[0] != '{' || !json.Valid(p) {
		return nil, 0, false
	}
	ms := splitMembers(p)
	for _, m := range ms {
		i, ok := k.patchFields[m.key]
		if !ok || changed.has(i) {
			return nil, 0, false
		}
		changed |= 1 << uint(i)
	}
	cur := reflect.ValueOf(e.obj).Elem()
	out = k.shallowCopy(e.obj)
	ov := reflect.ValueOf(out).Elem()
	var buf []byte
	for _, m := range ms {
		i := k.patchFields[m.key]
		dst := ov.Field(i)
		if isNull(m.val) {
			dst.SetZero()
			continue
		}
		// The whole document leaves out an empty field with omitempty,
		// where this encodes "", 0, false, null, [] or, for a map, {}
		// (patchFieldsOf excludes such fields that marshal themselves):
		// the merge treats all but {} as absent, and a map takes no
		// patch value but an object, which merges into {} as into
		// nothing.
		c, err := json.Marshal(cur.Field(i).Addr().Interface())
		if err != nil {
			return nil, 0, false
		}
		buf = mergeValue(buf[:0], c, m.val)
		v := reflect.New(dst.Type())
		if err := json.Unmarshal(buf, v.Interface()); err != nil {
			return nil, 0, false
		}
		dst.Set(v.Elem())
	}
	out.GetObjectKind().SetGroupVersionKind(k.gvk)
	return out, changed, true
}
