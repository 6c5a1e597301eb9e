package apiserver

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// now is the server's time for timestamps, in whole seconds as a real
// server serialises them.
func (s *Server) now() metav1.Time {
	return metav1.NewTime(s.clock.Now().Truncate(time.Second))
}

func (s *Server) nextRV() string {
	s.rv++
	return strconv.FormatUint(s.rv, 10)
}

// uidOf returns the UID of the object created n-th: "uid-" and n in at
// least eight digits, as fmt's "uid-%08d" gives it, without fmt.
func uidOf(n uint64) types.UID {
	var b [4 + 20]byte
	i := len(b)
	for n >= 10 || i > len(b)-7 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	i--
	b[i] = byte('0' + n)
	i -= 4
	copy(b[i:], "uid-")
	// One string, where the padding and the prefix made two more.
	return types.UID(b[i:])
}

func conflict(k *kind, name string) error {
	return apierrors.NewConflict(k.resource, name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// create stores obj, a server-owned object of kind k, as a new object.
func (s *Server) create(k *kind, obj client.Object, manager string) error {
	if !k.namespaced {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("creating %s %q: namespace is required", k.gvk.Kind, obj.GetName()))
	}
	if obj.GetResourceVersion() != "" {
		// kube-apiserver's storage refuses it with a bare 500: no reason.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "resourceVersion should not be set on objects to be created"}}
	}
	if obj.GetName() == "" {
		prefix := obj.GetGenerateName()
		if prefix == "" {
			return apierrors.NewInvalid(k.gvk.GroupKind(), "", field.ErrorList{
				field.Required(field.NewPath("metadata", "name"), "name or generateName is required"),
			})
		}
		for {
			s.nameSeq++
			name := fmt.Sprintf("%s%05d", prefix, s.nameSeq)
			if k.store.get(objKey{obj.GetNamespace(), name}) == nil {
				obj.SetName(name)
				break
			}
		}
	}
	key := objKey{obj.GetNamespace(), obj.GetName()}
	if k.store.get(key) != nil {
		return apierrors.NewAlreadyExists(k.resource, obj.GetName())
	}
	s.uidSeq++
	obj.SetUID(uidOf(s.uidSeq))
	obj.SetCreationTimestamp(s.now())
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetGeneration(0)
	if k.generation {
		obj.SetGeneration(1)
	}
	// Like kube-apiserver for custom resources, Create does not set status
	// behind a status subresource. Core kinds keep it: the twin's models
	// create nodes and pods as their kubelet and controllers would leave them.
	if k.status && k.gvk.Group != "" {
		k.clearStatus(obj)
	}
	dropEmptyMaps(obj)
	s.manageAnnotations(k, nil, obj, manager)
	obj.SetResourceVersion(s.nextRV())
	e := &entry{key: key, obj: obj}
	k.store.insert(e)
	k.reindex(e, obj)
	s.live[obj.GetUID()] = struct{}{}
	s.trackOwners(objRef{k, key}, nil, obj)
	s.emit(Added, obj, nil)
	return nil
}

// update replaces the object of e with in, a server-owned object carrying
// the caller's intent: all of it but server-managed metadata, or only its
// status when status is set. d says in which top-level fields in may
// differ from the stored object: the others are the stored object's own
// (shared) and are not compared. It returns the object stored, or the
// final state of an object removed because its last finalizer went.
func (s *Server) update(k *kind, e *entry, in client.Object, status bool, d diff, manager string) (client.Object, error) {
	cur := e.obj
	if rv := in.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return nil, conflict(k, cur.GetName())
	}
	if uid := in.GetUID(); uid != "" && uid != cur.GetUID() {
		return nil, conflict(k, cur.GetName())
	}
	// Stored objects are never changed in place (a write stores a new
	// one), so the new object may share the parts it keeps with cur.
	next := in
	var unchanged bool
	if status {
		next = k.withStatus(cur, in)
		unchanged = !d.differs(k.statusField, func() bool { return k.sameStatus(cur, next) })
	} else {
		if k.status {
			k.takeStatus(next, cur)
		}
		takeServerMeta(next, cur)
		dropEmptyMaps(next)
		s.manageAnnotations(k, cur, next, manager)
		sameContent := k.sameContent(cur, next, d)
		if !sameContent && k.generation {
			next.SetGeneration(cur.GetGeneration() + 1)
		}
		// With a status subresource the status is cur's; without one,
		// sameContent covered it.
		unchanged = sameContent && !d.differs(k.metaField, func() bool { return k.sameMeta(cur, next) })
	}

	if cur.GetDeletionTimestamp() != nil {
		for _, f := range next.GetFinalizers() {
			if !slices.Contains(cur.GetFinalizers(), f) {
				return nil, apierrors.NewInvalid(k.gvk.GroupKind(), cur.GetName(), field.ErrorList{
					field.Forbidden(field.NewPath("metadata", "finalizers"),
						fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizer %q", f)),
				})
			}
		}
		if len(next.GetFinalizers()) == 0 {
			// As in kube-apiserver, the write that removes the last
			// finalizer is not stored: the object is deleted in the
			// state stored before it, finalizers and all, and the
			// DELETED event carries that state; the writer gets its
			// own object back.
			final := k.shallowCopy(cur)
			s.remove(k, e, final)
			next.SetResourceVersion(final.GetResourceVersion())
			return next, nil
		}
	}
	if unchanged {
		// A write that changes nothing is not a write: no new
		// resourceVersion, no event.
		return cur, nil
	}
	s.replace(k, e, next)
	return next, nil
}

// serverMeta is the metadata that update takes from the stored object (or
// checks against it) on a write of the main resource, as fields of
// metav1.ObjectMeta: a patch that differs from the stored object only there
// does not change the metadata.
var serverMeta = func() fieldMask {
	var m fieldMask
	t := reflect.TypeFor[metav1.ObjectMeta]()
	for _, sm := range serverMetaFields {
		name := sm.name
		f, ok := t.FieldByName(name)
		if !ok || len(f.Index) != 1 {
			panic("metav1.ObjectMeta has no field " + name)
		}
		m |= 1 << uint(f.Index[0])
	}
	return m
}()

// serverMetaFields are the fields of serverMeta, by metav1.ObjectMeta
// field name, and how update takes each from the stored object.
var serverMetaFields = []struct {
	name string
	take func(dst, src client.Object)
}{
	{"Namespace", func(d, s client.Object) { d.SetNamespace(s.GetNamespace()) }},
	{"Name", func(d, s client.Object) { d.SetName(s.GetName()) }},
	{"ResourceVersion", func(d, s client.Object) { d.SetResourceVersion(s.GetResourceVersion()) }},
	{"UID", func(d, s client.Object) { d.SetUID(s.GetUID()) }},
	{"CreationTimestamp", func(d, s client.Object) { d.SetCreationTimestamp(s.GetCreationTimestamp()) }},
	{"DeletionTimestamp", func(d, s client.Object) { d.SetDeletionTimestamp(s.GetDeletionTimestamp()) }},
	{"DeletionGracePeriodSeconds", func(d, s client.Object) { d.SetDeletionGracePeriodSeconds(s.GetDeletionGracePeriodSeconds()) }},
	{"Generation", func(d, s client.Object) { d.SetGeneration(s.GetGeneration()) }},
}

// dropEmptyMaps stores empty labels and annotations as none, as
// kube-apiserver does (an empty map is not serialised).
func dropEmptyMaps(obj client.Object) {
	if a := obj.GetAnnotations(); a != nil && len(a) == 0 {
		obj.SetAnnotations(nil)
	}
	if l := obj.GetLabels(); l != nil && len(l) == 0 {
		obj.SetLabels(nil)
	}
}

// takeServerMeta sets the serverMeta fields of dst to those of src.
func takeServerMeta(dst, src client.Object) {
	for _, f := range serverMetaFields {
		f.take(dst, src)
	}
}

// replace stores next, a server-owned object, as the new state of e.
func (s *Server) replace(k *kind, e *entry, next client.Object) {
	cur := e.obj
	next.SetResourceVersion(s.nextRV())
	e.obj = next
	e.json, e.jsonOf = nil, nil
	k.reindex(e, next)
	s.trackOwners(objRef{k, e.key}, cur, next)
	s.emit(Modified, next, cur)
}

// delete deletes the object of e: it is removed at once unless it has
// finalizers, in which case it gets a deletionTimestamp and stays until
// the last one is removed.
func (s *Server) delete(k *kind, e *entry) {
	cur := e.obj
	// Shallow copies: only metadata fields of the copy's own are set
	// below, and stored objects are never changed in place.
	if len(cur.GetFinalizers()) == 0 {
		s.remove(k, e, k.shallowCopy(cur))
		return
	}
	if cur.GetDeletionTimestamp() != nil {
		return
	}
	next := k.shallowCopy(cur)
	ts := s.now()
	next.SetDeletionTimestamp(&ts)
	next.SetDeletionGracePeriodSeconds(new(int64(0)))
	if g := cur.GetGeneration(); g > 0 {
		next.SetGeneration(g + 1)
	}
	s.replace(k, e, next)
}

// remove takes the object of e out of the store, final being its last
// state, and collects the objects it owned.
func (s *Server) remove(k *kind, e *entry, final client.Object) {
	cur := e.obj
	ref := objRef{k, e.key}
	k.store.delete(e.key)
	k.reindex(e, nil)
	s.trackOwners(ref, cur, nil)
	uid := cur.GetUID()
	delete(s.live, uid)
	final.SetResourceVersion(s.nextRV())
	s.emit(Deleted, final, cur)
	s.collect(uid)
}

// collect deletes the dependents of a removed owner that have no owner
// left, as the garbage collector does in the background.
func (s *Server) collect(owner types.UID) {
	deps := make([]objRef, 0, len(s.dependents[owner]))
	for ref := range s.dependents[owner] {
		deps = append(deps, ref)
	}
	slices.SortFunc(deps, func(a, b objRef) int {
		if a.k != b.k {
			if a.k.gvk.String() < b.k.gvk.String() {
				return -1
			}
			return 1
		}
		return a.key.compare(b.key)
	})
	for _, ref := range deps {
		e := ref.k.store.get(ref.key)
		if e == nil {
			continue
		}
		orphaned := true
		for _, o := range e.obj.GetOwnerReferences() {
			if _, ok := s.live[o.UID]; ok {
				orphaned = false
				break
			}
		}
		if orphaned {
			s.delete(ref.k, e)
		}
	}
}

// trackOwners updates the dependents index for ref going from old to obj;
// either may be nil.
func (s *Server) trackOwners(ref objRef, old, obj client.Object) {
	var was, is []metav1.OwnerReference
	if old != nil {
		was = old.GetOwnerReferences()
	}
	if obj != nil {
		is = obj.GetOwnerReferences()
	}
	has := func(refs []metav1.OwnerReference, uid types.UID) bool {
		return slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == uid })
	}
	for _, o := range was {
		if !has(is, o.UID) {
			deps := s.dependents[o.UID]
			delete(deps, ref)
			if len(deps) == 0 {
				delete(s.dependents, o.UID)
			}
		}
	}
	for _, o := range is {
		if !has(was, o.UID) {
			deps := s.dependents[o.UID]
			if deps == nil {
				deps = map[objRef]struct{}{}
				s.dependents[o.UID] = deps
			}
			deps[ref] = struct{}{}
		}
	}
}
