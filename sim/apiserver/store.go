package apiserver

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// allNamespaces is the namespace part of the index key that spans every
// namespace, as in controller-runtime's cache.
const allNamespaces = "__all_namespaces"

// kind is one served GroupVersionKind with its objects and field indexes.
type kind struct {
	gvk, listGVK schema.GroupVersionKind
	// apiVersion is gvk's, as SetGroupVersionKind sets it (setGVK).
	apiVersion string
	resource   schema.GroupResource
	namespaced bool
	present    bool
	status     bool // has a status subresource
	// generation says whether objects of the kind have a
	// metadata.generation (hasGeneration); without one it stays 0.
	generation bool
	// custom is set for custom resources (not builtinGroup), which
	// refuse strategic merge patches and updates without a
	// resourceVersion.
	custom bool

	// goType is the struct type of a typed kind; nil when the kind is
	// served unstructured.
	goType reflect.Type
	// metaField and statusField are the indexes of the ObjectMeta and
	// Status fields of goType (-1 for none); contentFields are the others
	// but TypeMeta.
	metaField, statusField int
	contentFields          []int
	// ptrType is the TypeID of *goType when its ObjectMeta field is a
	// metav1.ObjectMeta, at metaOffset in it (metaOf); 0 otherwise.
	ptrType    TypeID
	metaOffset uintptr
	// copier copies objects of goType without reflection; nil for most
	// kinds.
	copier *copier
	// requests counts the requests of Client() on the kind by verb, as
	// placed in countedVerbs (Server.count).
	requests [len(countedVerbs)]uint64
	// times and statusTimes serialise the times of a typed object and of
	// its status (timeWalkerOf; nil when there are none), set with
	// walkersReady on the first in.
	// statusOffset is the offset of the Status field in goType.
	times, statusTimes walkFunc
	statusOffset       uintptr
	walkersReady       bool
	// scratch holds mergeFields' buffers from one patch to the next (a
	// server applies one patch at a time).
	scratch patcher
	// patch says how a merge patch is applied to goType field by field
	// (mergeFields), nil for the whole path; set with patchReady by
	// patchInfo on the first patch.
	patch      *structInfo
	patchReady bool

	store   store
	indexes map[string]*index
	// ordered are the indexes in the order they were added (index.pos).
	ordered []*index
	// byLabel indexes the objects by each of their labels, once a
	// listing has asked for a label (labelsIndexed): most kinds, and
	// most informer caches, are never listed by label, and the upkeep
	// was a map write per label on every write.
	byLabel       map[labelKey]*entrySet
	labelsIndexed bool
}

func newKind(gvk, listGVK schema.GroupVersionKind, namespaced bool, goType reflect.Type) *kind {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	k := &kind{
		gvk:         gvk,
		listGVK:     listGVK,
		apiVersion:  gvk.GroupVersion().String(),
		resource:    plural.GroupResource(),
		namespaced:  namespaced,
		present:     true,
		generation:  hasGeneration(gvk.GroupKind()),
		custom:      !builtinGroup(gvk.Group),
		goType:      goType,
		metaField:   -1,
		statusField: -1,
		store:       store{buckets: map[string]*bucket{}},
		indexes:     map[string]*index{},
	}
	if goType != nil {
		f := factsOf(goType)
		k.metaField, k.statusField, k.contentFields = f.metaField, f.statusField, f.contentFields
		k.status = k.statusField >= 0
		k.copier = f.copier
		k.ptrType, k.metaOffset = f.ptrType, f.metaOffset
	}
	return k
}

// metaOf returns the ObjectMeta of obj, a stored object of k, without
// interface calls or assertions; nil when obj is not a *goType with a
// metav1.ObjectMeta field.
func (k *kind) metaOf(obj client.Object) *metav1.ObjectMeta {
	if k.ptrType == 0 || TypeIDOf(obj) != k.ptrType {
		return nil
	}
	// The data word of the interface value: the *goType.
	p := (*[2]unsafe.Pointer)(unsafe.Pointer(&obj))[1]
	return (*metav1.ObjectMeta)(unsafe.Add(p, k.metaOffset))
}

// TypeID is the Go type of a value as a map key: the address of its type
// descriptor, which a map hashes as one word, where a reflect.Type key is
// hashed through its interface in twice the time. Maps from Go types to
// kinds are read on every request (and sim/informer's Holds, HoldsList
// and Observe on every cached read and event).
type TypeID uintptr

// TypeIDOf returns the TypeID of v's dynamic type, 0 for a nil v.
func TypeIDOf(v any) TypeID {
	// The type word of the interface value: the type descriptor that
	// reflect.TypeOf(v) returns, read without reflect's calls (a request
	// reads it once, and an informer on every cached read and event).
	return TypeID(uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&v))[0]))
}

// typeFacts are what a kind needs to know of its Go type: whether a
// pointer to it is a client.Object, where its ObjectMeta and Status are,
// and its copier. Go types never change, so they are worked out once per
// process (factsOf), not for every kind of every server: a twin run's API
// server registers the scheme's 500 kinds and every daemon's cache its
// own, and reflect's Implements alone was 1% of a run.
type typeFacts struct {
	object                 bool
	metaField, statusField int
	// contentFields is shared by every kind of the type: never modified.
	contentFields []int
	copier        *copier
	// ptrType and metaOffset are kind's (metaOf).
	ptrType    TypeID
	metaOffset uintptr
}

// goTypeFacts holds the typeFacts of each struct type by reflect.Type
// (a sweep runs twins in parallel).
var goTypeFacts sync.Map

// factsOf returns the typeFacts of struct type t.
func factsOf(t reflect.Type) *typeFacts {
	if f, ok := goTypeFacts.Load(t); ok {
		return f.(*typeFacts)
	}
	f := &typeFacts{object: reflect.PointerTo(t).Implements(objectType), metaField: -1, statusField: -1}
	for i := range t.NumField() {
		switch t.Field(i).Name {
		case "TypeMeta":
		case "ObjectMeta":
			f.metaField = i
			if sf := t.Field(i); sf.Type == reflect.TypeFor[metav1.ObjectMeta]() && sf.Anonymous {
				f.ptrType, f.metaOffset = TypeIDOf(reflect.New(t).Interface()), sf.Offset
			}
		case "Status":
			f.statusField = i
		default:
			f.contentFields = append(f.contentFields, i)
		}
	}
	if c, ok := copiers[t]; ok {
		f.copier = &c
	}
	got, _ := goTypeFacts.LoadOrStore(t, f)
	return got.(*typeFacts)
}

func (k *kind) typed() bool { return k.goType != nil }

// objKey is an object's namespace and name; namespace is empty for
// cluster-scoped kinds.
type objKey struct{ ns, name string }

// compare orders keys as kube-apiserver lists objects: by their etcd key
// "<namespace>/<name>", in which "a-b/x" comes before "a/x".
func (k objKey) compare(o objKey) int {
	return cmp.Or(nsCompare(k.ns, o.ns), cmp.Compare(k.name, o.name))
}

// nsCompare compares namespaces a and b as the prefixes a+"/" and b+"/"
// of storage keys.
func nsCompare(a, b string) int {
	if a == b {
		return 0
	}
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return cmp.Compare(a[i], b[i])
		}
	}
	if len(a) < len(b) {
		return cmp.Compare('/', b[n])
	}
	return cmp.Compare(a[n], '/')
}

// objRef names a stored object across kinds.
type objRef struct {
	k   *kind
	key objKey
}

// entry is a stored object. obj is never modified once stored: a write
// stores a new object.
type entry struct {
	key objKey
	obj client.Object
	// vals are the values indexed for obj, by index.pos.
	vals [][]string
	// labels are the labels indexed for obj, which shares them; nil
	// while the kind's labels are not indexed.
	labels map[string]string

	// json is the JSON encoding of obj, or nil until encoded asks for it;
	// jsonOf is the object it encodes.
	json   []byte
	jsonOf client.Object
}

// encoded returns the JSON encoding of e.obj, which the caller must not
// modify.
func (e *entry) encoded() ([]byte, error) {
	if e.jsonOf != e.obj || e.json == nil {
		b, err := json.Marshal(e.obj)
		if err != nil {
			return nil, err
		}
		e.json, e.jsonOf = b, e.obj
	}
	return e.json, nil
}

// store holds a kind's objects by namespace and name, and keeps the sorted
// orders that listings use until a create or delete changes them.
type store struct {
	buckets    map[string]*bucket
	namespaces []string // sorted keys of buckets; nil when stale
	n          int
}

type bucket struct {
	objs  map[string]*entry
	names []string // sorted keys of objs; nil when stale
}

func (st *store) get(key objKey) *entry {
	if b := st.buckets[key.ns]; b != nil {
		return b.objs[key.name]
	}
	return nil
}

func (st *store) insert(e *entry) {
	b := st.buckets[e.key.ns]
	if b == nil {
		b = &bucket{objs: map[string]*entry{}}
		st.buckets[e.key.ns] = b
		st.namespaces = nil
	}
	b.objs[e.key.name] = e
	b.names = nil
	st.n++
}

func (st *store) delete(key objKey) {
	b := st.buckets[key.ns]
	delete(b.objs, key.name)
	b.names = nil
	st.n--
	if len(b.objs) == 0 {
		delete(st.buckets, key.ns)
		st.namespaces = nil
	}
}

// list returns the entries of namespace ns, or of all namespaces when ns is
// empty, sorted by namespace and name.
func (st *store) list(ns string) []*entry {
	if ns != "" {
		b := st.buckets[ns]
		if b == nil {
			return nil
		}
		return b.sorted(nil)
	}
	if st.namespaces == nil {
		st.namespaces = slices.SortedFunc(maps.Keys(st.buckets), nsCompare)
	}
	out := make([]*entry, 0, st.n)
	for _, ns := range st.namespaces {
		out = st.buckets[ns].sorted(out)
	}
	return out
}

func (b *bucket) sorted(out []*entry) []*entry {
	if b.names == nil {
		b.names = slices.Sorted(maps.Keys(b.objs))
	}
	for _, name := range b.names {
		out = append(out, b.objs[name])
	}
	return out
}

// entrySet is a set of entries with, until it changes, their sorted order.
type entrySet struct {
	m      map[objKey]*entry
	sorted []*entry // nil when stale
}

// list returns the entries of set sorted by namespace and name. The slice is
// shared: the caller must not modify it.
func (set *entrySet) list() []*entry {
	if set.sorted == nil {
		set.sorted = make([]*entry, 0, len(set.m))
		for _, e := range set.m {
			set.sorted = append(set.sorted, e)
		}
		slices.SortFunc(set.sorted, func(a, b *entry) int { return a.key.compare(b.key) })
	}
	return set.sorted
}

// addTo adds e to the set of key in sets.
func addTo[K comparable](sets map[K]*entrySet, key K, e *entry) {
	set := sets[key]
	if set == nil {
		set = &entrySet{m: map[objKey]*entry{}}
		sets[key] = set
	}
	set.m[e.key] = e
	set.sorted = nil
}

// removeFrom removes e from the set of key in sets.
func removeFrom[K comparable](sets map[K]*entrySet, key K, e *entry) {
	set := sets[key]
	if set == nil {
		return
	}
	delete(set.m, e.key)
	set.sorted = nil
	if len(set.m) == 0 {
		delete(sets, key)
	}
}

// index is a field index: the objects of a kind by the values extract
// returns for them, under "<namespace>/<value>" keys and, as controller-
// runtime's cache does, under "__all_namespaces/<value>" keys.
type index struct {
	// pos is the index's place in kind.ordered and entry.vals.
	pos     int
	extract client.IndexerFunc
	byKey   map[indexKey]*entrySet
}

// valsOf returns the values e is indexed under by ix.
func (e *entry) valsOf(ix *index) []string {
	if ix.pos < len(e.vals) {
		return e.vals[ix.pos]
	}
	return nil
}

type indexKey struct{ ns, val string }

// lookup returns the entries whose field has val, in namespace ns (any
// namespace when ns is empty), or nil.
func (ix *index) lookup(ns, val string) *entrySet {
	if ns == "" {
		ns = allNamespaces
	}
	return ix.byKey[indexKey{ns, val}]
}

// labelKey names the objects of a kind with one label value, in one
// namespace or, under allNamespaces, in all.
type labelKey struct{ ns, key, val string }

// lookupLabel returns the entries whose label key has val, in namespace ns
// (any namespace when ns is empty), or nil.
func (k *kind) lookupLabel(ns, key, val string) *entrySet {
	if ns == "" {
		ns = allNamespaces
	}
	k.indexLabels()
	return k.byLabel[labelKey{ns, key, val}]
}

// indexLabels builds the label index of k from its stored objects the
// first time a listing needs it; writes keep it from then on.
func (k *kind) indexLabels() {
	if k.labelsIndexed {
		return
	}
	k.labelsIndexed = true
	k.byLabel = map[labelKey]*entrySet{}
	for _, e := range k.store.list("") {
		k.reindexLabels(e, e.obj)
	}
}

// reindex updates the indexes of kind k for e, whose object is now obj, or
// removes e from them when obj is nil.
func (k *kind) reindex(e *entry, obj client.Object) {
	for _, ix := range k.ordered {
		k.reindexField(e, ix, obj)
	}
	if k.labelsIndexed {
		k.reindexLabels(e, obj)
	}
}

// reindexLabels updates the label index of k for e, whose object is now
// obj (nil: removed).
func (k *kind) reindexLabels(e *entry, obj client.Object) {
	var labels map[string]string
	if obj != nil {
		labels = obj.GetLabels()
	}
	if sameMap(labels, e.labels) {
		// A write that keeps the labels shares their map (stored objects
		// are never changed in place): nothing to reindex.
		return
	}
	for key, val := range e.labels {
		if v, ok := labels[key]; !ok || v != val {
			k.labelChange(removeFrom, e, key, val)
		}
	}
	for key, val := range labels {
		if v, ok := e.labels[key]; !ok || v != val {
			k.labelChange(addTo, e, key, val)
		}
	}
	e.labels = labels
}

func (k *kind) labelChange(op func(map[labelKey]*entrySet, labelKey, *entry), e *entry, key, val string) {
	op(k.byLabel, labelKey{allNamespaces, key, val}, e)
	if e.key.ns != "" {
		op(k.byLabel, labelKey{e.key.ns, key, val}, e)
	}
}

func (k *kind) reindexField(e *entry, ix *index, obj client.Object) {
	var vals []string
	if obj != nil {
		if vals = ix.extract(obj); len(vals) > 1 {
			vals = slices.Compact(slices.Sorted(slices.Values(vals)))
		}
	}
	old := e.valsOf(ix)
	if slices.Equal(old, vals) {
		return
	}
	for _, v := range old {
		if !slices.Contains(vals, v) {
			ix.remove(e, v)
		}
	}
	for _, v := range vals {
		if !slices.Contains(old, v) {
			ix.add(e, v)
		}
	}
	if ix.pos >= len(e.vals) {
		e.vals = append(e.vals, make([][]string, len(k.ordered)-len(e.vals))...)
	}
	e.vals[ix.pos] = vals
}

func (ix *index) add(e *entry, val string) {
	addTo(ix.byKey, indexKey{allNamespaces, val}, e)
	if e.key.ns != "" {
		addTo(ix.byKey, indexKey{e.key.ns, val}, e)
	}
}

func (ix *index) remove(e *entry, val string) {
	removeFrom(ix.byKey, indexKey{allNamespaces, val}, e)
	if e.key.ns != "" {
		removeFrom(ix.byKey, indexKey{e.key.ns, val}, e)
	}
}

// sameMap reports whether a and b are the same map (or both nil), not
// merely equal.
func sameMap(a, b map[string]string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
