package apiserver

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fieldMask is a set of fields of a struct type (the top-level fields of a
// typed kind's Go type, or of a struct in it), by index.
type fieldMask uint64

// allFields is every field: what a write that may change any of them
// compares.
const allFields = ^fieldMask(0)

// has reports whether m holds field i; allFields holds every field,
// including none (-1), as for unstructured kinds.
func (m fieldMask) has(i int) bool {
	return m == allFields || (i >= 0 && m&(1<<uint(i)) != 0)
}

// A diff is the set of top-level fields in which an object to write
// differs from the stored one, as update compares them (serialEqual;
// metadata outside serverMeta, which update takes from the stored object);
// the others are the stored object's own (shared). mergeFields works it
// out exactly, and update then compares nothing; anyDiff says nothing, and
// update compares every field.
type diff fieldMask

// anyDiff is a diff that says nothing: every field is compared. (A diff
// that names every field is taken as anyDiff: compared, still correct.)
const anyDiff = diff(allFields)

// differs reports whether field i differs: as d says, or, when d says
// nothing, as same (the comparison) does not.
func (d diff) differs(i int, same func() bool) bool {
	if d == anyDiff {
		return !same()
	}
	return fieldMask(d).has(i)
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// patchFieldsOf returns the indexes of the fields of the struct type t (a
// kind's Go type: metadata, spec, status, ...; or a struct in it) that
// encoding/json encodes and decodes on their own under an exact name, by
// JSON name; nil when t is encoded as a whole (a custom marshaler) or has
// too many fields for a fieldMask. The members of inline embedded structs
// (apiVersion and kind of TypeMeta) are not among them, nor are fields with
// the string or omitzero options.
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

// structInfo is what mergeFields knows of a struct type whose fields a
// merge patch object is applied to one by one: the fields it can set on
// their own, by exact JSON name (patchFieldsOf), and how.
type structInfo struct {
	byName map[string]int
	fields []fieldInfo // by field index; set for the fields in byName
}

// fieldInfo says how a patch value is applied to one field.
type fieldInfo struct {
	// sub is set when the field is a struct, or a pointer to one (ptr),
	// into which a patch object is applied field by field.
	sub *structInfo
	// ptr says that the field is a pointer to the type the fields below
	// describe (its base type); otherwise the base type is the field's.
	ptr bool
	// neverObject says that the field never encodes as a JSON object, so
	// that merging a patch value into it gives the value pruned of nulls.
	neverObject bool
	// stringMap says that the field is a map[string]string.
	stringMap bool
	// scalar is the kind of a base type that is a bool, string or integer
	// encoded by encoding/json itself, whose literals are decoded here;
	// reflect.Invalid otherwise.
	scalar reflect.Kind
	// unmarshaler says that the base type decodes itself (UnmarshalJSON
	// on a pointer to it); isTime that it is metav1.Time.
	unmarshaler, isTime bool
	// stringSlice says that the field is a slice of strings that
	// encoding/json decodes itself (decodeStrings).
	stringSlice bool
}

var structInfos = struct {
	sync.Mutex
	m map[reflect.Type]*structInfo
}{m: map[reflect.Type]*structInfo{}}

// structInfoOf returns the structInfo of the struct type t, nil when t is
// not one a patch object is applied to field by field (see
// patchableStruct).
// Computed once per type.
func structInfoOf(t reflect.Type) *structInfo {
	structInfos.Lock()
	defer structInfos.Unlock()
	return buildStructInfo(t)
}

func buildStructInfo(t reflect.Type) *structInfo {
	if s, ok := structInfos.m[t]; ok {
		return s
	}
	if !patchableStruct(t) {
		structInfos.m[t] = nil
		return nil
	}
	s := &structInfo{byName: patchFieldsOf(t), fields: make([]fieldInfo, t.NumField())}
	structInfos.m[t] = s // before its fields: t may contain itself
	for _, i := range s.byName {
		s.fields[i] = buildFieldInfo(t.Field(i).Type)
	}
	return s
}

// patchableStruct reports whether a patch object can be applied to the struct
// type t field by field: t is encoded field by field by encoding/json (no
// custom marshaler), compared field by field by serialEqual (no equality
// function), has only exported fields (compared one by one) and few enough
// for a fieldMask. Embedded structs are allowed: their promoted fields are
// not in patchFieldsOf, so a patch naming one falls back.
func patchableStruct(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t.NumField() > 64 || marshalsItself(t) {
		return false
	}
	if _, ok := serialEqual.Equalities[t]; ok {
		return false
	}
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			return false
		}
	}
	return true // marshalsItself and the field count, patchFieldsOf's nil cases, are checked above
}

func buildFieldInfo(t reflect.Type) fieldInfo {
	f := fieldInfo{neverObject: neverObject(t), stringMap: t == reflect.TypeFor[map[string]string]()}
	f.stringSlice = t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String && !marshalsItself(t) && !marshalsItself(t.Elem())
	base := t
	if t.Kind() == reflect.Pointer {
		f.ptr, base = true, t.Elem()
		if base.Kind() == reflect.Pointer {
			return f // nothing fast
		}
	}
	switch {
	case reflect.PointerTo(base).Implements(jsonUnmarshaler):
		f.unmarshaler = true
		f.isTime = base == reflect.TypeFor[metav1.Time]()
	case marshalsItself(base):
	case base.Kind() == reflect.Struct:
		f.sub = buildStructInfo(base)
	default:
		switch k := base.Kind(); k {
		case reflect.Bool, reflect.String,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.scalar = k
		}
	}
	return f
}

// neverObject reports whether values of type t never encode as a JSON
// object: bools, numbers, strings, slices and arrays, and pointers to them,
// that encoding/json encodes itself.
func neverObject(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if marshalsItself(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Slice, reflect.Array,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// patchInfo returns the structInfo of the Go type of typed kind k, nil
// when its merge patches take the whole path: an unstructured kind, a
// type not applied field by field, or metadata other than
// metav1.ObjectMeta (update's serverMeta).
func (k *kind) patchInfo() *structInfo {
	if !k.patchReady {
		k.patchReady = true
		if k.typed() && k.metaField >= 0 && k.goType.Field(k.metaField).Type == reflect.TypeFor[metav1.ObjectMeta]() {
			k.patch = structInfoOf(k.goType)
		}
		if k.patch != nil {
			if i, ok := k.patch.byName["metadata"]; !ok || i != k.metaField || k.patch.fields[i].sub == nil {
				k.patch = nil
			}
		}
	}
	return k.patch
}

// mergeFields applies the JSON merge patch data to the object of e field
// by field: the result is a shallow copy of the stored object in which each
// top-level field the patch names is replaced by what decoding the whole
// patched document would give it, and the others are shared with the
// stored object. A member that is a JSON object applied to a struct, or to
// a pointer to a struct, is applied the same way one level down, as far as
// it goes (patchObject); at the leaves (scalars, slices, maps, types that
// encode themselves, and any struct the patch object does not name by
// exact field names, each once) the value is what the whole document would
// decode to there: null gives the zero value; an object or array merged
// into the stored value encoded alone (patchLeaf) gives its decoding into a
// zero value. Fields not named keep the stored value, which is what the
// whole path gives them when the stored object is in JSON round-trip form.
//
// The diff returned is exact: each leaf set is compared with the stored
// one. ok is false when the patch is not a JSON object naming each member
// once by the exact name of a top-level field, or a value does not decode:
// the caller then takes the full path, which gives the errors.
func (k *kind) mergeFields(e *entry, data []byte) (out client.Object, d diff, ok bool) {
	info := k.patchInfo()
	if info == nil {
		return nil, 0, false
	}
	p := bytes.TrimLeft(data, " \t\r\n")
	pt := &k.scratch
	if len(p) == 0 || p[0] != '{' || !pt.validate(p) {
		return nil, 0, false
	}
	pt.fm = pt.fm[:0]
	start, ok := pt.splitFields(info, p)
	if !ok {
		return nil, 0, false
	}
	end := len(pt.fm)
	cur := reflect.ValueOf(e.obj).Elem()
	out = k.shallowCopy(e.obj)
	ov := reflect.ValueOf(out).Elem()
	for j := start; j < end; j++ {
		m := pt.fm[j] // a copy: the members of nested objects are appended after end
		i := m.idx
		f := &info.fields[i]
		if i == k.metaField {
			// update takes serverMeta from the stored object (or
			// refuses the write over resourceVersion or uid): a
			// difference there is not a change of metadata.
			var changed fieldMask
			if changed, ok = pt.structField(f.sub, ov.Field(i), cur.Field(i), m.val); !ok {
				return nil, 0, false
			}
			if changed&^serverMeta != 0 {
				d |= 1 << uint(i)
			}
			continue
		}
		var changed bool
		if changed, ok = pt.field(f, ov.Field(i), cur.Field(i), m.val); !ok {
			return nil, 0, false
		}
		if changed {
			d |= 1 << uint(i)
		}
	}
	k.setGVK(out)
	return out, d, true
}

// patcher applies the members of a merge patch; buf is scratch space,
// fm the members of the objects being applied, a stack (splitFields).
// doc is the patch being applied (or the last one) and ends where each
// string, object and array in it ends (validJSONEnds), by index in doc:
// splitFields reads
// them instead of scanning each member's value, which the objects nested
// in it made a scan per level of the same bytes.
type patcher struct {
	buf  []byte
	fm   []fieldMember
	doc  []byte
	ends []int
}

// validate reports whether the patch doc is valid JSON and makes it the
// document of p, with its ends.
func (p *patcher) validate(doc []byte) bool {
	if cap(p.ends) < len(doc) {
		p.ends = make([]int, len(doc))
	}
	p.ends = p.ends[:len(doc)]
	if !validJSONEnds(doc, p.ends) {
		p.doc = nil
		return false
	}
	p.doc = doc
	return true
}

// base returns the index in p.doc at which obj, a part of it, starts; -1
// when obj is not a part of it (splitFields then scans obj).
func (p *patcher) base(obj []byte) int {
	b := cap(p.doc) - cap(obj) // obj = p.doc[b:...] keeps the rest of its capacity
	if len(obj) == 0 || b < 0 || b+len(obj) > len(p.doc) || &p.doc[b] != &obj[0] {
		return -1
	}
	return b
}

// skip returns the index in obj after the value that starts at obj[i],
// obj starting at base in p.doc (-1: not in it): a string, object or
// array by its end recorded in p.ends.
func (p *patcher) skip(obj []byte, base, i int) int {
	if base >= 0 {
		switch obj[i] {
		case '"', '{', '[':
			return p.ends[base+i] - base
		}
	}
	return skipValue(obj, i)
}

// fieldMember is a member of a patch object applied field by field: the
// index of the field its key names, and its raw value.
type fieldMember struct {
	idx int
	val []byte
}

// splitFields appends the members of the valid JSON object obj to p.fm,
// each with the index of the field of s its key names, and returns where
// they start; the caller drops them (p.fm = p.fm[:start]) when done. ok is
// false, and p.fm as it was, when a key names no field of s or a field
// twice. Keys are looked up as they are in the document, without a
// string made for each (splitMembers makes one: 4% of a twin run).
func (p *patcher) splitFields(s *structInfo, obj []byte) (start int, ok bool) {
	start = len(p.fm)
	base := p.base(obj)
	var named fieldMask
	i := skipWS(obj, 1)
	for i < len(obj) && obj[i] != '}' {
		kEnd := p.skip(obj, base, i)
		raw := obj[i+1 : kEnd-1]
		var idx int
		if bytes.IndexByte(raw, '\\') < 0 {
			idx, ok = s.byName[string(raw)]
		} else {
			idx, ok = s.byName[unquote(obj[i:kEnd])]
		}
		if !ok || named.has(idx) {
			p.fm = p.fm[:start]
			return start, false
		}
		named |= 1 << uint(idx)
		i = skipWS(obj, kEnd)
		i = skipWS(obj, i+1) // ':'
		vEnd := p.skip(obj, base, i)
		p.fm = append(p.fm, fieldMember{idx, obj[i:vEnd]})
		i = skipWS(obj, vEnd)
		if i < len(obj) && obj[i] == ',' {
			i = skipWS(obj, i+1)
		}
	}
	return start, true
}

// field sets dst, a field of a new object that holds the value of cur, the
// same field of the stored object, to what decoding the document patched
// with v, not empty, gives it there. cur is invalid (fresh) when the stored
// object has nothing there: dst is then zero, and what the document has
// there is v pruned of nulls. changed reports whether dst now differs from
// cur, as serialEqual compares them (false when fresh: the caller knows).
func (p *patcher) field(f *fieldInfo, dst, cur reflect.Value, v []byte) (changed, ok bool) {
	fresh := !cur.IsValid()
	switch {
	case isNull(v):
		dst.SetZero()
	case f.sub != nil && v[0] == '{' && !f.ptr:
		c, ok := p.patchObject(f.sub, dst, cur, v)
		return c != 0, ok
	case f.sub != nil && v[0] == '{':
		n := reflect.New(dst.Type().Elem())
		dst.Set(n)
		if fresh || cur.IsNil() {
			// A patch object into null or nothing: the merge starts from
			// nothing, so decoding gives a new struct with only what v
			// names.
			_, ok := p.patchObject(f.sub, n.Elem(), reflect.Value{}, v)
			return true, ok
		}
		n.Elem().Set(cur.Elem())
		c, ok := p.patchObject(f.sub, n.Elem(), cur.Elem(), v)
		return c != 0, ok
	default:
		if !p.patchLeaf(f, dst, cur, v) {
			return false, false
		}
	}
	return !fresh && !leafEqual(f, cur, dst), true
}

// structField is field for a struct field with info s (which it must
// have), reporting which of its fields changed.
func (p *patcher) structField(s *structInfo, dst, cur reflect.Value, v []byte) (changed fieldMask, ok bool) {
	if v[0] == '{' {
		return p.patchObject(s, dst, cur, v)
	}
	if isNull(v) {
		dst.SetZero()
	} else if !p.patchLeaf(&fieldInfo{}, dst, cur, v) {
		return 0, false
	}
	return changedFields(dst, cur), true
}

// patchObject applies the patch object v to dst, a struct of info s that
// holds the value of cur (or is zero, cur invalid, when fresh), member by
// member, and returns the fields that changed (none when fresh). A member
// that is not the exact name of one of s's fields, or a name given twice,
// makes it decode the whole struct instead (patchLeaf).
func (p *patcher) patchObject(s *structInfo, dst, cur reflect.Value, v []byte) (changed fieldMask, ok bool) {
	start, named := p.splitFields(s, v)
	if !named {
		if !p.patchLeaf(&fieldInfo{}, dst, cur, v) {
			return 0, false
		}
		if !cur.IsValid() {
			return 0, true
		}
		return changedFields(dst, cur), true
	}
	end := len(p.fm)
	fresh := !cur.IsValid()
	for j := start; j < end; j++ {
		m := p.fm[j] // a copy: the members of nested objects are appended after end
		i := m.idx
		var c reflect.Value
		if !fresh {
			c = cur.Field(i)
		}
		fc, ok := p.field(&s.fields[i], dst.Field(i), c, m.val)
		if !ok {
			return 0, false // the patch takes the full path: p is dropped
		}
		if fc {
			changed |= 1 << uint(i)
		}
	}
	p.fm = p.fm[:start]
	return changed, true
}

// changedFields returns the fields in which a and b, structs of one type,
// differ as update compares them (serialEqual).
func changedFields(a, b reflect.Value) fieldMask {
	var m fieldMask
	for i := range a.NumField() {
		if !serialDeepEqual(a.Field(i).Addr().Interface(), b.Field(i).Addr().Interface()) {
			m |= 1 << uint(i)
		}
	}
	return m
}

// patchLeaf sets dst, which holds the value of cur (or is zero, cur invalid,
// when fresh), to the decoding of v, neither null nor empty, merged into
// what the document has there: for a value that is not an object or array,
// or merged into nothing or into a value that is never an object, that is
// v pruned of nulls; for a map[string]string, the map with the members set
// or deleted; otherwise cur encoded alone, v merged into it (mergeValue).
// The whole document leaves out an empty field with omitempty, where this
// encodes "", 0, false, null, [] or, for a map, {} (patchFieldsOf excludes
// such fields that marshal themselves): the merge treats all but {} as
// absent, and a map takes no patch value but an object, which merges into
// {} as into nothing.
func (p *patcher) patchLeaf(f *fieldInfo, dst, cur reflect.Value, v []byte) bool {
	data := v
	switch {
	case v[0] != '{' && v[0] != '[':
	case !cur.IsValid() || f.neverObject:
		p.buf = pruneNulls(p.buf[:0], v)
		data = p.buf
	case f.stringMap && v[0] == '{' && patchStringMap(dst, cur, v):
		return true
	default:
		c, err := json.Marshal(cur.Addr().Interface())
		if err != nil {
			return false
		}
		p.buf = mergeValue(p.buf[:0], c, v)
		data = p.buf
	}
	return decodeLeaf(f, dst, data)
}

// decodeLeaf sets dst to the decoding of data, not null, into a zero value
// of its type, as encoding/json does it.
func decodeLeaf(f *fieldInfo, dst reflect.Value, data []byte) bool {
	if f.stringSlice && decodeStrings(dst, data) {
		return true
	}
	if f.scalar == reflect.Invalid && !f.unmarshaler {
		n := reflect.New(dst.Type())
		if json.Unmarshal(data, n.Interface()) != nil {
			return false
		}
		dst.Set(n.Elem())
		return true
	}
	if !f.ptr && !f.isTime && !f.unmarshaler && setScalar(dst, f.scalar, data) {
		// A scalar field set in place: setScalar sets all of it.
		return true
	}
	t := dst.Type()
	if f.ptr {
		t = t.Elem()
	}
	n := reflect.New(t)
	switch {
	case f.isTime && setTime(n.Interface().(*metav1.Time), data):
	case f.unmarshaler:
		// What json.Unmarshal calls with a valid value that is not
		// null.
		if n.Interface().(json.Unmarshaler).UnmarshalJSON(data) != nil {
			return false
		}
	case !setScalar(n.Elem(), f.scalar, data):
		if json.Unmarshal(data, n.Interface()) != nil {
			return false
		}
	}
	if f.ptr {
		dst.Set(n)
	} else {
		dst.Set(n.Elem())
	}
	return true
}

// setScalar sets v, of kind k, to the JSON literal data when it is one that
// encoding/json decodes into v without an error and that is simple enough
// to decode here: a string without escapes or bytes outside printable
// ASCII, true or false, an integer in range. It reports whether it did.
func setScalar(v reflect.Value, k reflect.Kind, data []byte) bool {
	switch k {
	case reflect.String:
		if b, ok := plainBytes(data); ok {
			// A value that v already holds (most values of a patch
			// built against the stored object) is not set again: no
			// string is made for it.
			if string(b) != v.String() {
				v.SetString(string(b))
			}
			return true
		}
	case reflect.Bool:
		switch string(data) {
		case "true":
			v.SetBool(true)
			return true
		case "false":
			v.SetBool(false)
			return true
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n, err := strconv.ParseInt(string(data), 10, 64); err == nil && !v.OverflowInt(n) {
			v.SetInt(n)
			return true
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, err := strconv.ParseUint(string(data), 10, 64); err == nil && !v.OverflowUint(n) {
			v.SetUint(n)
			return true
		}
	}
	return false
}

// setTime sets t as metav1.Time.UnmarshalJSON does from data when data is
// a plain string (plainString) that parses; it reports whether it did.
func setTime(t *metav1.Time, data []byte) bool {
	s, ok := plainString(data)
	if !ok {
		return false
	}
	pt, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return false
	}
	t.Time = pt.Local()
	return true
}

// plainString returns the string of the JSON string literal data when it
// has no escapes and only printable ASCII, which encoding/json decodes to
// the bytes between the quotes.
func plainString(data []byte) (string, bool) {
	b, ok := plainBytes(data)
	return string(b), ok
}

// plainBytes is plainString without making the string: the bytes between
// the quotes, shared with data.
func plainBytes(data []byte) ([]byte, bool) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return nil, false
	}
	b := data[1 : len(data)-1]
	i := 0
	// Eight bytes at a time while they are all plain, then byte by byte.
	for ; i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])); i += 8 {
	}
	for _, c := range b[i:] {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return b, true
}

// plainWord reports whether the eight bytes of x are all printable ASCII
// other than a quote or a backslash (0x20 to 0x7e): none of 0x80 or
// above, none that mayEndPlain flags (below 0x20, a quote, a backslash),
// and no 0x7f.
func plainWord(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	del := x ^ (ones * 0x7f)
	return x&highs == 0 && !mayEndPlain(x) && (del-ones)&^del&highs == 0
}

// patchStringMap sets dst, a map[string]string holding the map of cur, to
// a new map with the patch object v applied: a member null deletes the
// key, a string sets it, in order (the last of duplicate keys wins, as in
// the merge). It reports false, leaving dst alone, when a member is neither
// null nor a plain string (plainString).
func patchStringMap(dst, cur reflect.Value, v []byte) bool {
	ms := splitMembers(v)
	for _, m := range ms {
		if _, ok := plainString(m.val); !ok && !isNull(m.val) {
			return false
		}
	}
	old := cur.Interface().(map[string]string)
	out := make(map[string]string, len(old)+len(ms))
	maps.Copy(out, old)
	for _, m := range ms {
		if isNull(m.val) {
			delete(out, m.key)
		} else {
			out[m.key], _ = plainString(m.val)
		}
	}
	dst.Set(reflect.ValueOf(out))
	return true
}

// leafEqual reports whether the leaves a and b of field f are equal as
// serialEqual compares them.
func leafEqual(f *fieldInfo, a, b reflect.Value) bool {
	if f.scalar != reflect.Invalid {
		if f.ptr {
			if a.IsNil() || b.IsNil() {
				return a.IsNil() == b.IsNil()
			}
			a, b = a.Elem(), b.Elem()
		}
		switch f.scalar {
		case reflect.String:
			return a.String() == b.String()
		case reflect.Bool:
			return a.Bool() == b.Bool()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return a.Int() == b.Int()
		default:
			return a.Uint() == b.Uint()
		}
	}
	if f.stringMap {
		return maps.Equal(a.Interface().(map[string]string), b.Interface().(map[string]string))
	}
	return serialDeepEqual(a.Addr().Interface(), b.Addr().Interface())
}

// decodeStrings sets dst, a slice of strings, to the decoding of data
// into a zero value, as json.Unmarshal gives it, when data is an array of
// plain strings (plainBytes), [] included (an empty slice, not nil); it
// reports whether it did, leaving dst alone when it did not. (A pod's
// metadata.finalizers, and the annotation lists of a BootcNode's status,
// went through json.Unmarshal.)
func decodeStrings(dst reflect.Value, data []byte) bool {
	if len(data) < 2 || data[0] != '[' {
		return false
	}
	var elems [8][]byte
	vals := elems[:0]
	i := skipWS(data, 1)
	for i < len(data) && data[i] != ']' {
		if data[i] != '"' {
			return false
		}
		end := skipString(data, i)
		b, ok := plainBytes(data[i:end])
		if !ok {
			return false
		}
		vals = append(vals, b)
		i = skipWS(data, end)
		if i < len(data) && data[i] == ',' {
			i = skipWS(data, i+1)
		}
	}
	if i >= len(data) || skipWS(data, i+1) != len(data) {
		return false
	}
	out := reflect.MakeSlice(dst.Type(), len(vals), len(vals))
	for j, b := range vals {
		out.Index(j).SetString(string(b))
	}
	dst.Set(out)
	return true
}
