package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// simClient is a client.Client of a Server. The admin client skips
// counters and faults.
type simClient struct {
	s     *Server
	admin bool
	// manager is the field manager of writes that name none.
	manager string
}

// managerOf is the field manager of a write: the request's, or the
// client's default.
func (c *simClient) managerOf(requested string) string {
	if requested != "" {
		return requested
	}
	return c.manager
}

var _ client.Client = (*simClient)(nil)

// begin starts a request: it counts it, resolves its kind, and consults the
// fault hook. key is normalised for cluster-scoped kinds.
func (c *simClient) begin(ctx context.Context, verb string, obj runtime.Object, key client.ObjectKey) (*kind, client.ObjectKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, key, err
	}
	var gvk schema.GroupVersionKind
	var k *kind
	var kerr error
	t := TypeIDOf(obj)
	if r, ok := c.s.resolved[t]; ok {
		// What the lines below found the first time for this Go type.
		gvk, k = r.gvk, r.k
		if !k.present {
			k, kerr = c.s.kindFor(r.k.gvk)
		} else if r.list {
			gvk = k.gvk
		}
	} else {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, c.s.scheme); err != nil {
			return nil, key, err
		}
		_, isList := obj.(client.ObjectList)
		if isList {
			k, kerr = c.s.kindForList(gvk)
			if kerr == nil {
				gvk = k.gvk
			}
		} else {
			k, kerr = c.s.kindFor(gvk)
		}
		c.s.resolve(obj, t, isList)
	}
	if kerr == nil && !k.namespaced {
		key.Namespace = ""
	}
	if !c.admin {
		if kerr == nil {
			c.s.count(verb, k)
		} else {
			c.s.count(verb, nil)
		}
		if c.s.fault != nil {
			if err := c.s.fault(verb, gvk, key); err != nil {
				return nil, key, err
			}
		}
	}
	return k, key, kerr
}

// resolvedType is what begin works out from a typed object's Go type:
// its GroupVersionKind by the scheme (a list's, for a list), and the kind
// served for it (the item kind, for a list), which may be not present.
type resolvedType struct {
	gvk  schema.GroupVersionKind
	k    *kind
	list bool
}

// resolve remembers the resolvedType of obj, of Go type t, when only its
// type decides it: a typed object the scheme knows under one
// GroupVersionKind (never an unstructured or metadata-only object, whose
// kind is in the object), of a kind served now. The scheme must not change
// once the server is made (twin.Run builds it first); a kind, once
// served, keeps its *kind (RemoveKind only marks it not present).
func (s *Server) resolve(obj runtime.Object, t TypeID, isList bool) {
	switch obj.(type) {
	case runtime.Unstructured, *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return
	}
	gvks, unversioned, err := s.scheme.ObjectKinds(obj)
	if err != nil || unversioned || len(gvks) != 1 {
		return
	}
	gvk := gvks[0]
	k := s.kinds[gvk]
	if isList {
		k = s.lists[gvk]
		if k != nil && s.kinds[k.gvk] != k {
			return
		}
	}
	if k == nil {
		return
	}
	if s.resolved == nil {
		s.resolved = map[TypeID]resolvedType{}
	}
	s.resolved[t] = resolvedType{gvk: gvk, k: k, list: isList}
}

func notFound(k *kind, name string) error { return apierrors.NewNotFound(k.resource, name) }

func dryRun(verb string, dry []string) error {
	if len(dry) > 0 {
		return apierrors.NewBadRequest("sim apiserver: dry run is not supported (" + verb + ")")
	}
	return nil
}

// Get copies the object named key into obj.
func (c *simClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, key, err := c.begin(ctx, VerbGet, obj, key)
	if err != nil {
		return err
	}
	e := k.store.get(objKey{key.Namespace, key.Name})
	if e == nil {
		return notFound(k, key.Name)
	}
	if pm, ok := obj.(*metav1.PartialObjectMetadata); ok {
		// A metadata-only read (as with the Accept header
		// as=PartialObjectMetadata): the object's metadata, no spec or
		// status.
		return metadataOut(e.obj, pm, typeMetaOf(k.gvk), false)
	}
	if len(opts) > 0 && k.copier != nil && slices.ContainsFunc(opts, func(o client.GetOption) bool { _, ok := o.(shared); return ok }) && reflect.TypeOf(obj).Elem() == k.goType {
		k.copier.share(e.obj, obj)
		return nil
	}
	return k.out(e.obj, obj)
}

// Shared is a Get option for the twin's own models: the caller's object
// gets the stored object's fields, its maps, slices and pointers shared
// with the server's, which the caller must not modify (as
// client.UnsafeDisableDeepCopy for a list). It applies to the kinds with a
// copier (fastcopy.go); other kinds are copied as without it. A real
// client ignores it; the controller and the daemon never pass it.
var Shared shared

type shared struct{}

func (shared) ApplyToGet(*client.GetOptions) {}

// typeMetaOf returns the TypeMeta that SetGroupVersionKind(gvk) sets.
func typeMetaOf(gvk schema.GroupVersionKind) metav1.TypeMeta {
	var tm metav1.TypeMeta
	tm.SetGroupVersionKind(gvk)
	return tm
}

// metadataOut copies the metadata of the stored object obj into pm, and
// tm (typeMetaOf the object's kind, made once for a listing); with share
// (client.UnsafeDisableDeepCopy, a caller that promises not to modify it)
// its maps and slices are the stored object's.
func metadataOut(obj client.Object, pm *metav1.PartialObjectMetadata, tm metav1.TypeMeta, share bool) error {
	if m, ok := obj.(interface{ GetObjectMeta() metav1.Object }); ok {
		if om, ok := m.GetObjectMeta().(*metav1.ObjectMeta); ok {
			if share {
				pm.ObjectMeta = *om
			} else {
				om.DeepCopyInto(&pm.ObjectMeta)
			}
			pm.TypeMeta = tm
			return nil
		}
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("sim apiserver: no metadata on %T", obj)
	}
	pm.ObjectMeta = metav1.ObjectMeta{
		Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		Generation: u.GetGeneration(), CreationTimestamp: u.GetCreationTimestamp(), DeletionTimestamp: u.GetDeletionTimestamp(),
		Labels: u.GetLabels(), Annotations: u.GetAnnotations(), Finalizers: u.GetFinalizers(), OwnerReferences: u.GetOwnerReferences(),
	}
	pm.TypeMeta = tm
	return nil
}

// List copies the matching objects into list, sorted by namespace and name.
// Field selectors must be exact matches of indexed fields, or of
// metadata.name and metadata.namespace. client.UnsafeDisableDeepCopy is
// honoured for typed lists.
func (c *simClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	k, key, err := c.begin(ctx, VerbList, list, client.ObjectKey{Namespace: o.Namespace})
	if err != nil {
		return err
	}
	entries, err := c.s.match(k, key.Namespace, o.LabelSelector, o.FieldSelector)
	if err != nil {
		return err
	}
	if pm, ok := list.(*metav1.PartialObjectMetadataList); ok {
		// A metadata-only listing (as=PartialObjectMetadataList): each
		// object's metadata, no spec or status.
		pm.Items = make([]metav1.PartialObjectMetadata, len(entries))
		share := o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy
		tm := typeMetaOf(k.gvk)
		for i, e := range entries {
			if om := k.metaOf(e.obj); om != nil {
				it := &pm.Items[i]
				it.TypeMeta = tm
				if share {
					it.ObjectMeta = *om
				} else {
					om.DeepCopyInto(&it.ObjectMeta)
				}
				continue
			}
			if err := metadataOut(e.obj, &pm.Items[i], tm, share); err != nil {
				return err
			}
		}
		pm.SetGroupVersionKind(k.listGVK)
	} else if u, ok := list.(*unstructured.UnstructuredList); ok {
		u.Items = make([]unstructured.Unstructured, len(entries))
		for i, e := range entries {
			if err := k.out(e.obj, &u.Items[i]); err != nil {
				return err
			}
		}
		u.SetGroupVersionKind(k.listGVK)
	} else {
		if !k.typed() {
			return fmt.Errorf("%s is served unstructured; list it into *unstructured.UnstructuredList, not %T", k.gvk, list)
		}
		// Stored objects are never modified, so, as with controller-runtime's
		// cache, a caller that promises not to modify them may share them.
		share := o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy
		if k.copier != nil && k.copier.fill(list, entries, share) {
			list.SetResourceVersion(strconv.FormatUint(c.s.rv, 10))
			list.SetContinue("")
			return nil
		}
		items := make([]runtime.Object, len(entries))
		for i, e := range entries {
			if share {
				items[i] = e.obj
			} else {
				items[i] = e.obj.DeepCopyObject()
			}
		}
		if err := meta.SetList(list, items); err != nil {
			return fmt.Errorf("listing %s: %w", k.gvk.Kind, err)
		}
	}
	list.SetResourceVersion(strconv.FormatUint(c.s.rv, 10))
	list.SetContinue("")
	return nil
}

// match returns the entries of kind k in namespace ns (all when empty) that
// match the selectors, sorted by namespace and name. With an indexed field
// it reads only the objects the index names. The slice may be an index's
// own (entrySet.list): the caller must not modify it. A write does not
// either (it drops the index's slice), so the caller may write while it
// goes through it.
func (s *Server) match(k *kind, ns string, ls labels.Selector, fs fields.Selector) ([]*entry, error) {
	var reqs fields.Requirements
	if fs != nil && !fs.Empty() {
		reqs = fs.Requirements()
	}
	var base *entrySet
	for _, r := range reqs {
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals:
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("listing %s: field selector %q: only =, == and != are supported", k.gvk.Kind, fs))
		}
		ix := k.indexes[r.Field]
		switch {
		case ix != nil:
			// An empty value also matches the objects the index has no
			// value for: that set is not indexed.
			if r.Operator == selection.NotEquals || r.Value == "" {
				continue
			}
			if set := ix.lookup(ns, r.Value); base == nil || set == nil || len(set.m) < len(base.m) {
				base = set
				if base == nil {
					return nil, nil
				}
			}
		case r.Field != "metadata.name" && r.Field != "metadata.namespace":
			return nil, apierrors.NewBadRequest(fmt.Sprintf("listing %s: field selector %q: field %q is not indexed", k.gvk.Kind, fs, r.Field))
		}
	}
	var candidates []*entry
	shared := false // candidates belongs to an index
	switch {
	case base != nil:
		candidates, shared = base.list(), true
	case len(reqs) == 0 && ls != nil:
		// The label index narrows a selector with an equality.
		lreqs, selectable := ls.Requirements()
		var best *entrySet
		found := false
		for _, r := range lreqs {
			vals := r.ValuesUnsorted()
			switch r.Operator() {
			case selection.Equals, selection.DoubleEquals, selection.In:
			default:
				continue
			}
			if len(vals) != 1 {
				continue
			}
			set := k.lookupLabel(ns, r.Key(), vals[0])
			if set == nil {
				return nil, nil
			}
			if !found || len(set.m) < len(best.m) {
				best, found = set, true
			}
		}
		switch {
		case !selectable || !found:
			candidates = k.store.list(ns)
		case len(lreqs) == 1:
			// Every entry of the set matches the one requirement.
			return best.list(), nil
		default:
			candidates, shared = best.list(), true
		}
	default:
		candidates = s.unindexed(k, ns, reqs)
	}
	out := candidates[:0]
	if shared {
		out = make([]*entry, 0, len(candidates))
	}
	for _, e := range candidates {
		if matchesFields(k, e, reqs) && (ls == nil || ls.Matches(labels.Set(e.obj.GetLabels()))) {
			out = append(out, e)
		}
	}
	return out, nil
}

// unindexed returns the candidates of a listing no index narrows: one
// object for a name in a known namespace, else the namespace or the kind.
func (s *Server) unindexed(k *kind, ns string, reqs fields.Requirements) []*entry {
	for _, r := range reqs {
		if r.Operator == selection.NotEquals {
			continue
		}
		if r.Field == "metadata.namespace" && k.namespaced {
			if ns != "" && ns != r.Value {
				return nil
			}
			ns = r.Value
		}
	}
	for _, r := range reqs {
		if r.Operator == selection.NotEquals {
			continue
		}
		if r.Field == "metadata.name" && (ns != "" || !k.namespaced) {
			if e := k.store.get(objKey{ns, r.Value}); e != nil {
				return []*entry{e}
			}
			return nil
		}
	}
	return k.store.list(ns)
}

func matchesFields(k *kind, e *entry, reqs fields.Requirements) bool {
	for _, r := range reqs {
		var has bool
		if ix := k.indexes[r.Field]; ix != nil {
			// An object the index has no value for has the empty value.
			vals := e.valsOf(ix)
			has = slices.Contains(vals, r.Value) || (r.Value == "" && len(vals) == 0)
		} else {
			switch r.Field {
			case "metadata.name":
				has = e.key.name == r.Value
			case "metadata.namespace":
				has = e.key.ns == r.Value
			}
		}
		if has == (r.Operator == selection.NotEquals) {
			return false
		}
	}
	return true
}

// Create stores a new object and copies what was stored into obj.
func (c *simClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	k, _, err := c.begin(ctx, VerbCreate, obj, client.ObjectKeyFromObject(obj))
	if err != nil {
		return err
	}
	o := client.CreateOptions{}
	if err := dryRun(VerbCreate, o.ApplyOptions(opts).DryRun); err != nil {
		return err
	}
	in, err := k.in(obj, !echoes(opts), false)
	if err != nil {
		return err
	}
	if err := c.s.create(k, in, c.managerOf(o.FieldManager)); err != nil {
		return err
	}
	if !echoes(opts) {
		if in != obj {
			// The identity the server gave it, no copy of the rest (a
			// typed obj was kept: it is the stored object).
			obj.SetUID(in.GetUID())
			obj.SetResourceVersion(in.GetResourceVersion())
			obj.SetCreationTimestamp(in.GetCreationTimestamp())
		}
		return nil
	}
	return k.out(in, obj)
}

// Update replaces an object; with a status subresource, its status is kept.
func (c *simClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	o := client.UpdateOptions{}
	o.ApplyOptions(opts)
	return c.update(ctx, VerbUpdate, obj, false, o.DryRun, c.managerOf(o.FieldManager), echoes(opts))
}

func (c *simClient) update(ctx context.Context, verb string, obj client.Object, status bool, dry []string, manager string, echo bool) error {
	k, key, err := c.begin(ctx, verb, obj, client.ObjectKeyFromObject(obj))
	if err != nil {
		return err
	}
	if err := c.checkWrite(k, verb, status, dry); err != nil {
		return err
	}
	e := k.store.get(objKey{key.Namespace, key.Name})
	if e == nil {
		return notFound(k, key.Name)
	}
	in, err := k.in(obj, !echo, status)
	if err != nil {
		return err
	}
	if k.custom && in.GetResourceVersion() == "" {
		// Custom resources do not allow unconditional updates.
		return apierrors.NewInvalid(k.gvk.GroupKind(), key.Name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), int64(0), "must be specified for an update"),
		})
	}
	stored, err := c.s.update(k, e, in, status, anyDiff, manager)
	if err != nil || !echo {
		return err
	}
	return k.out(stored, obj)
}

func (c *simClient) checkWrite(k *kind, verb string, status bool, dry []string) error {
	if status && !k.status {
		// kube-apiserver serves no such path.
		return apierrors.NewGenericServerResponse(http.StatusNotFound, verb, k.resource, "",
			fmt.Sprintf("%s has no status subresource", k.gvk.Kind), 0, false)
	}
	return dryRun(verb, dry)
}

// Patch applies a JSON merge patch, a JSON patch or, for typed kinds, a
// strategic merge patch. A patch carrying metadata.resourceVersion is an
// optimistic lock.
func (c *simClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	o := client.PatchOptions{}
	o.ApplyOptions(opts)
	return c.patch(ctx, VerbPatch, obj, patch, false, o.DryRun, c.managerOf(o.FieldManager), echoes(opts))
}

func (c *simClient) patch(ctx context.Context, verb string, obj client.Object, patch client.Patch, status bool, dry []string, manager string, echo bool) error {
	k, key, err := c.begin(ctx, verb, obj, client.ObjectKeyFromObject(obj))
	if err != nil {
		return err
	}
	if patch.Type() == types.ApplyPatchType || patch.Type() == types.ApplyCBORPatchType {
		return ErrApplyNotSupported
	}
	if err := c.checkWrite(k, verb, status, dry); err != nil {
		return err
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("computing the %s patch of %s %q: %w", patch.Type(), k.gvk.Kind, key.Name, err)
	}
	e := k.store.get(objKey{key.Namespace, key.Name})
	if e == nil {
		return notFound(k, key.Name)
	}
	in, d, err := c.s.applyPatch(k, e, patch.Type(), data, status)
	if err != nil {
		return err
	}
	stored, err := c.s.update(k, e, in, status, d, manager)
	if err != nil || !echo {
		return err
	}
	return k.out(stored, obj)
}

// applyPatch returns the object of e with the patch applied, and where it
// may differ from the stored object (anyDiff but for a merge patch applied
// field by field, see mergeFields).
func (s *Server) applyPatch(k *kind, e *entry, pt types.PatchType, data []byte, status bool) (client.Object, diff, error) {
	var in client.Object
	d, ok := anyDiff, false
	if pt == types.MergePatchType && !s.wholePatches {
		in, d, ok = k.mergeFields(e, data)
	}
	if !ok {
		var err error
		if in, err = s.patchWhole(k, e, pt, data, status); err != nil {
			return nil, 0, err
		}
		d = anyDiff
	}
	if in.GetName() != e.key.name || in.GetNamespace() != e.key.ns {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("patching %s %q: metadata.name and metadata.namespace cannot change", k.gvk.Kind, e.key.name))
	}
	return in, d, nil
}

// patchWhole returns the object of e with the patch applied to its whole
// JSON encoding. For a patch of the status subresource of a typed kind,
// only the metadata, the status and the fields the patch names are
// decoded: update reads no others.
func (s *Server) patchWhole(k *kind, e *entry, pt types.PatchType, data []byte, status bool) (client.Object, error) {
	name := e.key.name
	orig, err := e.encoded()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %q: %w", k.gvk.Kind, name, err)
	}
	var patched []byte
	switch pt {
	case types.MergePatchType:
		var keep func(string) bool
		switch {
		case status && k.typed():
			keep = statusPatchKeep
		case k.status && k.typed():
			// The main resource of a kind with a status subresource
			// keeps the stored status (update takes it from the stored
			// object): it need not be merged or decoded.
			keep = mainPatchKeep
		}
		var ok bool
		if patched, ok = mergePatch(orig, data, keep); !ok {
			patched, err = jsonpatch.MergePatch(orig, data)
		}
	case types.JSONPatchType:
		p, derr := jsonpatch.DecodePatch(data)
		if derr != nil {
			return nil, apierrors.NewBadRequest(derr.Error())
		}
		if patched, err = p.Apply(orig); err != nil {
			// As kube-apiserver answers a patch that does not apply
			// (a failed test, a missing path): 422.
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", k.resource, name,
				fmt.Sprintf("applying the JSON patch to %s %q: %v", k.gvk.Kind, name, err), 0, false)
		}
	case types.StrategicMergePatchType:
		if !k.typed() || k.custom {
			return nil, apierrors.NewGenericServerResponse(415, "patch", k.resource, name,
				"strategic merge patch is not supported for "+k.gvk.Kind+"; use a merge patch", 0, false)
		}
		patched, err = strategicpatch.StrategicMergePatch(orig, data, k.newObject())
	default:
		return nil, apierrors.NewGenericServerResponse(415, "patch", k.resource, name,
			fmt.Sprintf("patch type %q is not supported", pt), 0, false)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("applying the %s patch to %s %q: %v", pt, k.gvk.Kind, name, err))
	}
	in, err := k.decode(patched)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding %s %q after the patch: %v", k.gvk.Kind, name, err))
	}
	return in, nil
}

// statusPatchKeep names the top-level fields a status patch must decode
// besides those it names.
func statusPatchKeep(key string) bool { return key == "metadata" || key == "status" }

// mainPatchKeep names the top-level fields a patch of the main resource of
// a kind with a status subresource must decode besides those it names.
func mainPatchKeep(key string) bool { return key != "status" }

// Delete deletes an object: at once, or, when it has finalizers, by setting
// its deletionTimestamp. Dependents are garbage-collected in the same call.
func (c *simClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	k, key, err := c.begin(ctx, VerbDelete, obj, client.ObjectKeyFromObject(obj))
	if err != nil {
		return err
	}
	o := client.DeleteOptions{}
	do := o.ApplyOptions(opts).AsDeleteOptions()
	if err := checkDelete(do); err != nil {
		return err
	}
	e := k.store.get(objKey{key.Namespace, key.Name})
	if e == nil {
		return notFound(k, key.Name)
	}
	return c.s.deleteChecked(k, e, do.Preconditions)
}

func checkDelete(do *metav1.DeleteOptions) error {
	if do.PropagationPolicy != nil && *do.PropagationPolicy == metav1.DeletePropagationOrphan {
		return apierrors.NewBadRequest("sim apiserver: propagationPolicy Orphan is not supported")
	}
	return dryRun(VerbDelete, do.DryRun)
}

// deleteChecked deletes the object of e if it meets the preconditions.
func (s *Server) deleteChecked(k *kind, e *entry, pre *metav1.Preconditions) error {
	if pre != nil {
		if pre.UID != nil && *pre.UID != e.obj.GetUID() {
			return conflict(k, e.key.name)
		}
		if pre.ResourceVersion != nil && *pre.ResourceVersion != e.obj.GetResourceVersion() {
			return conflict(k, e.key.name)
		}
	}
	s.delete(k, e)
	return nil
}

// DeleteAllOf deletes every object of obj's kind that matches the options,
// in namespace and name order.
func (c *simClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	o := client.DeleteAllOfOptions{}
	o.ApplyOptions(opts)
	k, key, err := c.begin(ctx, VerbDeleteAllOf, obj, client.ObjectKey{Namespace: o.Namespace})
	if err != nil {
		return err
	}
	do := o.AsDeleteOptions()
	if err := checkDelete(do); err != nil {
		return err
	}
	entries, err := c.s.match(k, key.Namespace, o.LabelSelector, o.FieldSelector)
	if err != nil {
		return err
	}
	for _, e := range entries {
		// An earlier deletion may have collected this one.
		if k.store.get(e.key) == e {
			c.s.delete(k, e)
		}
	}
	return nil
}

// Apply is not supported.
func (c *simClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return ErrApplyNotSupported
}

// Status returns the client of the status subresource.
func (c *simClient) Status() client.SubResourceWriter {
	return &subResourceClient{c: c, name: "status"}
}

// SubResource returns the client of a subresource: "status", or "eviction"
// of pods.
func (c *simClient) SubResource(name string) client.SubResourceClient {
	return &subResourceClient{c: c, name: name}
}

// Scheme returns the server's scheme.
func (c *simClient) Scheme() *runtime.Scheme { return c.s.scheme }

// RESTMapper returns a mapper of the kinds the server serves at the time of
// each call.
func (c *simClient) RESTMapper() meta.RESTMapper { return mapperView{c.s} }

// GroupVersionKindFor returns the GVK of obj.
func (c *simClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, c.s.scheme)
}

// IsObjectNamespaced reports whether obj's kind is namespaced.
func (c *simClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, c.s.scheme)
	if err != nil {
		return false, err
	}
	k, err := c.s.kindFor(gvk)
	if err != nil {
		return false, err
	}
	return k.namespaced, nil
}

// NoEcho is a write option (Create, Update, Patch, and their status forms)
// for the twin's own models, which drop the object they write: the server
// does not copy the object written back into the caller's, as a real
// client decodes the server's answer into it, and a Create or Update of a
// typed object takes the caller's object as it is instead of a copy (a
// Create's object becomes the stored one, with the UID, resourceVersion
// and creationTimestamp the server gave it). The caller must not modify
// the object, or what it refers to, after the write. A real client
// ignores it; the controller and the daemon never pass it.
var NoEcho noEcho

type noEcho struct{}

func (noEcho) ApplyToCreate(*client.CreateOptions)                       {}
func (noEcho) ApplyToUpdate(*client.UpdateOptions)                       {}
func (noEcho) ApplyToPatch(*client.PatchOptions)                         {}
func (noEcho) ApplyToSubResourceUpdate(*client.SubResourceUpdateOptions) {}
func (noEcho) ApplyToSubResourcePatch(*client.SubResourcePatchOptions)   {}

// echoes reports whether a write with opts copies the object written back
// into the caller's (no NoEcho among them).
func echoes[T any](opts []T) bool {
	for _, o := range opts {
		if _, ok := any(o).(noEcho); ok {
			return false
		}
	}
	return true
}
