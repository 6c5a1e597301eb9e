// Package apiserver is the twin's API server: an in-memory object store that
// implements controller-runtime's client.Client with the behaviour the
// controller relies on from a real kube-apiserver — resourceVersion
// conflicts, generation, the status subresource, merge and strategic merge
// patches, finalizers and deletionTimestamp, owner-reference garbage
// collection, evictions — plus synchronous watch events, fault injection and
// request counters.
//
// The server is single-threaded like the rest of the twin. Objects are kept as
// typed Go objects (or unstructured for kinds registered as such) and copied
// with DeepCopyObject on the way in and out; only patches go through JSON.
// Every listing is sorted by namespace and name, and nothing the server does
// depends on map iteration order.
//
// The conformance test (sim/apiserver/conformance) runs the same requests
// against this server and a real kube-apiserver and requires the same
// results; docs/fidelity.md, "API server conformance", lists what it found.
// Known differences from kube-apiserver, kept on purpose:
//   - deletion is immediate unless the object has finalizers: pod grace
//     periods are not modelled;
//   - garbage collection runs synchronously inside the request that removed
//     the owner (background and foreground policies alike); Orphan is refused;
//     objects created with owners that never existed are not collected;
//   - namespaces need not exist; there is no admission, defaulting or
//     validation beyond what is listed here;
//   - Create drops .status behind a status subresource, as for custom
//     resources, except for core kinds (Node, Pod, ...), which keep it: the
//     twin's models create them as their kubelet and controllers would
//     leave them (a real server makes a new Pod's status {phase: Pending});
//   - field selectors are served for metadata.name, metadata.namespace and
//     every field indexed with IndexField, whether or not kube-apiserver
//     supports that field for the kind (it does for a Pod's spec.nodeName,
//     not for a BootcNode's spec.pool): the server doubles as the store of
//     the twin's informer caches, which serve such indexes;
//   - Limit and Continue of List are ignored: a List returns every match;
//   - times set by clients keep sub-second precision on Create and Update
//     (a real server rounds them to seconds when it serialises them);
//   - server-side apply and dry run are not supported; PartialObjectMetadata
//     only by Get.
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// Verbs name requests in counters and fault hooks. A subresource request is
// "<verb>/<subresource>".
const (
	VerbGet          = "get"
	VerbList         = "list"
	VerbCreate       = "create"
	VerbUpdate       = "update"
	VerbPatch        = "patch"
	VerbDelete       = "delete"
	VerbDeleteAllOf  = "deletecollection"
	VerbUpdateStatus = "update/status"
	VerbPatchStatus  = "patch/status"
	VerbEvict        = "create/eviction"
)

// ErrApplyNotSupported is returned for server-side apply requests.
var ErrApplyNotSupported = errors.New("sim apiserver: server-side apply is not supported; use Update or a merge patch")

// EventType says what a write did to an object.
type EventType string

// The event types, named as in Kubernetes watch events.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one successful write, as a watch would see it. Object is the
// object after the write (for Deleted, its last state): the stored object
// itself, not a copy, as an informer hands its cached object to handlers.
// Old is the object before it, nil for Added. Both are shared with the
// store and by all subscribers, which must not modify them (the server
// never changes a stored object in place: a write stores a new one).
type Event struct {
	Type   EventType
	Object client.Object
	Old    client.Object
}

// FaultFunc is consulted before each request of Client(); a non-nil error is
// returned to the caller instead of serving the request.
type FaultFunc func(verb string, gvk schema.GroupVersionKind, key client.ObjectKey) error

// EvictionHandler decides a pod eviction. It receives the stored pod,
// shared, which it must not change (stored objects are never changed in
// place), and a copy of the eviction. A handler that admits the eviction
// deletes the pod itself, typically through AdminClient().Delete; one that
// refuses returns an error such as apierrors.NewTooManyRequests for a
// PodDisruptionBudget.
type EvictionHandler func(ctx context.Context, pod *corev1.Pod, ev *policyv1.Eviction) error

// VerbCount is the number of requests of one verb.
type VerbCount struct {
	Verb  string
	Count uint64
}

// Server is the in-memory API server. It is not safe for concurrent use.
type Server struct {
	scheme *runtime.Scheme
	clock  clock.PassiveClock

	kinds map[schema.GroupVersionKind]*kind
	lists map[schema.GroupVersionKind]*kind // list GVK → item kind

	rv, uidSeq, nameSeq uint64

	// live holds the UID of every stored object; dependents maps an owner
	// UID to the objects whose ownerReferences name it.
	live       map[types.UID]struct{}
	dependents map[types.UID]map[objRef]struct{}

	subs       []*subscriber
	pending    []Event
	delivering bool

	fault FaultFunc
	evict EvictionHandler
	// verbCounts and counts count requests of Client() per verb (of
	// countedVerbs and others); kindCounts per other verb and kind (a
	// kind counts its own, kind.requests).
	verbCounts [len(countedVerbs)]uint64
	counts     map[string]uint64
	kindCounts map[verbKind]uint64
	// podRemovals is Count(VerbEvict) + CountOf(VerbDelete, "Pod"),
	// kept as one counter: the invariants read it after every event.
	podRemovals uint64

	mapper      meta.RESTMapper
	mapperStale bool

	client, admin *simClient
	// byType remembers typed kinds by Go type for kindOf (mirror.go).
	byType map[TypeID]*kind
	// resolved remembers what begin found for a typed object's Go type.
	resolved map[TypeID]resolvedType

	// trackedSets caches fieldsOf by FieldsV1 set (managed.go).
	trackedSets map[string]*trackedSet

	// wholePatches turns off the field-wise path of merge patches
	// (mergeFields): every patch is applied to the whole object, as the
	// tests that compare the two paths need.
	wholePatches bool
}

type subscriber struct {
	fn func(Event)
}

// New returns an empty server for the kinds of scheme. A kind is served when
// its Go type is a client.Object and the scheme also knows its List kind. A
// kind has a status subresource iff its Go type has a Status field (change
// it with SetStatusSubresource). Kinds are namespaced except the built-in
// cluster-scoped ones and those of group bootroll.dev (change it with
// SetNamespaced). clk stamps creationTimestamp and deletionTimestamp.
func New(scheme *runtime.Scheme, clk clock.PassiveClock) *Server {
	s := newServer(scheme, clk)
	for gvk := range scheme.AllKnownTypes() {
		s.typedKind(gvk)
	}
	return s
}

func newServer(scheme *runtime.Scheme, clk clock.PassiveClock) *Server {
	s := &Server{
		scheme:      scheme,
		clock:       clk,
		kinds:       map[schema.GroupVersionKind]*kind{},
		lists:       map[schema.GroupVersionKind]*kind{},
		live:        map[types.UID]struct{}{},
		dependents:  map[types.UID]map[objRef]struct{}{},
		counts:      map[string]uint64{},
		kindCounts:  map[verbKind]uint64{},
		mapperStale: true,
	}
	s.client = &simClient{s: s, manager: ControllerManager}
	s.admin = &simClient{s: s, admin: true, manager: AdminManager}
	return s
}

// Client returns the client the controllers under test use: its requests are
// counted and go through the fault hook.
func (s *Server) Client() client.Client { return s.client }

// AdminClient returns a client for the twin's own models (kubelet, scheduler,
// Karpenter, scenario setup), which stand for parts of the control plane: its
// requests are neither counted nor faulted.
func (s *Server) AdminClient() client.Client { return s.admin }

// Subscribe calls fn after every successful write, with writes in the order
// they happened. A write made by a subscriber is delivered after the event
// being delivered has reached every subscriber. The returned func
// unsubscribes.
func (s *Server) Subscribe(fn func(Event)) (cancel func()) {
	sub := &subscriber{fn: fn}
	s.subs = append(s.subs, sub)
	return func() {
		// A new slice, so that a delivery ranging over the old one is unaffected.
		s.subs = slices.DeleteFunc(slices.Clone(s.subs), func(x *subscriber) bool { return x == sub })
	}
}

// SetFault sets the fault hook of Client(); nil removes it.
func (s *Server) SetFault(fn FaultFunc) { s.fault = fn }

// SetEvictionHandler sets the eviction handler; nil restores the default,
// which honours PodDisruptionBudgets by their status as kube-apiserver
// does (evictDefault) and deletes the pod.
func (s *Server) SetEvictionHandler(fn EvictionHandler) { s.evict = fn }

// countedVerbs are the verbs a request of Client() is counted under
// without a map (begin counts every request): by their place here, in
// Server.verbCounts and kind.requests. Other verbs (other subresources)
// are counted in Server.counts and Server.kindCounts.
var countedVerbs = [...]string{VerbGet, VerbList, VerbCreate, VerbUpdate, VerbPatch, VerbDelete,
	VerbDeleteAllOf, VerbUpdateStatus, VerbPatchStatus, VerbEvict}

// verbIndex returns the place of verb in countedVerbs, -1 if it is not there.
func verbIndex(verb string) int {
	switch verb {
	case VerbGet:
		return 0
	case VerbList:
		return 1
	case VerbCreate:
		return 2
	case VerbUpdate:
		return 3
	case VerbPatch:
		return 4
	case VerbDelete:
		return 5
	case VerbDeleteAllOf:
		return 6
	case VerbUpdateStatus:
		return 7
	case VerbPatchStatus:
		return 8
	case VerbEvict:
		return 9
	}
	return -1
}

// count counts a request of Client() with verb, on kind k when its kind is
// served (else nil).
func (s *Server) count(verb string, k *kind) {
	i := verbIndex(verb)
	if i >= 0 {
		s.verbCounts[i]++
	} else {
		s.counts[verb]++
	}
	if verb == VerbEvict {
		s.podRemovals++
	}
	if k != nil {
		if i >= 0 {
			k.requests[i]++
		} else {
			s.kindCounts[verbKind{verb, k.gvk.Kind}]++
		}
		if verb == VerbDelete && k.gvk.Kind == "Pod" {
			s.podRemovals++
		}
	}
}

// Counts returns the number of requests of Client() per verb, sorted by verb.
// Faulted and failed requests count.
func (s *Server) Counts() []VerbCount {
	out := make([]VerbCount, 0, len(s.counts)+len(countedVerbs))
	for i, n := range s.verbCounts {
		if n > 0 {
			out = append(out, VerbCount{Verb: countedVerbs[i], Count: n})
		}
	}
	for verb, n := range s.counts {
		out = append(out, VerbCount{Verb: verb, Count: n})
	}
	slices.SortFunc(out, func(a, b VerbCount) int { return strings.Compare(a.Verb, b.Verb) })
	return out
}

// Count returns the number of requests of Client() with verb.
func (s *Server) Count(verb string) uint64 {
	if i := verbIndex(verb); i >= 0 {
		return s.verbCounts[i]
	}
	return s.counts[verb]
}

// CountOf returns the number of requests of Client() with verb on objects
// (or lists) of kind, e.g. CountOf(VerbDelete, "Pod").
func (s *Server) CountOf(verb, kind string) uint64 {
	i := verbIndex(verb)
	if i < 0 {
		return s.kindCounts[verbKind{verb, kind}]
	}
	var n uint64
	for _, k := range s.kinds {
		if k.gvk.Kind == kind {
			n += k.requests[i]
		}
	}
	return n
}

// PodRemovals returns Count(VerbEvict) + CountOf(VerbDelete, "Pod"): the
// requests of Client() that remove pods, without the map lookups.
func (s *Server) PodRemovals() uint64 { return s.podRemovals }

type verbKind struct{ verb, kind string }

// ResetCounts zeroes the request counters.
func (s *Server) ResetCounts() {
	clear(s.counts)
	clear(s.kindCounts)
	s.verbCounts = [len(countedVerbs)]uint64{}
	for _, k := range s.kinds {
		k.requests = [len(countedVerbs)]uint64{}
	}
	s.podRemovals = 0
}

// ResourceVersion returns the server's current resourceVersion.
func (s *Server) ResourceVersion() uint64 { return s.rv }

// RegisterUnstructured serves gvk, listed as listGVK (Kind+"List" when
// listGVK is empty), as unstructured objects, with a status subresource. It
// is how the twin serves CRDs it has no Go types for, such as Karpenter's.
func (s *Server) RegisterUnstructured(gvk, listGVK schema.GroupVersionKind, namespaced bool) error {
	if listGVK.Empty() {
		listGVK = gvk.GroupVersion().WithKind(gvk.Kind + "List")
	}
	if s.kinds[gvk] != nil || s.scheme.Recognizes(gvk) {
		return fmt.Errorf("registering unstructured kind %s: the kind is already served", gvk)
	}
	if s.lists[listGVK] != nil {
		return fmt.Errorf("registering unstructured kind %s: list kind %s is already served", gvk, listGVK)
	}
	k := newKind(gvk, listGVK, namespaced, nil)
	k.status = true
	s.kinds[gvk] = k
	s.lists[listGVK] = k
	s.mapperStale = true
	return nil
}

// RemoveKind stops serving gvk, as when its CRD is deleted: its objects are
// discarded (with Deleted events, without waiting for finalizers, and with
// garbage collection of their dependents) and requests for it fail with a
// meta.NoKindMatchError until AddKind.
func (s *Server) RemoveKind(gvk schema.GroupVersionKind) error {
	k, err := s.kindFor(gvk)
	if err != nil {
		return fmt.Errorf("removing kind %s: %w", gvk, err)
	}
	for _, e := range k.store.list("") {
		// Collecting an earlier object may have removed this one.
		if k.store.get(e.key) == e {
			s.remove(k, e, e.obj.DeepCopyObject().(client.Object))
		}
	}
	k.present = false
	s.mapperStale = true
	return nil
}

// AddKind serves gvk again after RemoveKind, with no objects, as when its
// CRD is installed.
func (s *Server) AddKind(gvk schema.GroupVersionKind) error {
	k := s.kinds[gvk]
	if k == nil {
		if k = s.typedKind(gvk); k == nil {
			return fmt.Errorf("adding kind %s: neither in the scheme nor registered", gvk)
		}
	}
	k.present = true
	s.mapperStale = true
	return nil
}

// SetStatusSubresource turns the status subresource of gvk on or off. Without
// one, Update and Patch write .status like any other field and
// Status().Update fails.
func (s *Server) SetStatusSubresource(gvk schema.GroupVersionKind, enabled bool) error {
	k, err := s.kindFor(gvk)
	if err != nil {
		return fmt.Errorf("setting the status subresource of %s: %w", gvk, err)
	}
	if enabled && k.typed() && k.statusField < 0 {
		return fmt.Errorf("setting the status subresource of %s: %s has no Status field", gvk, k.goType)
	}
	k.status = enabled
	return nil
}

// SetNamespaced sets whether gvk is namespaced. Change it before creating
// objects of the kind.
func (s *Server) SetNamespaced(gvk schema.GroupVersionKind, namespaced bool) error {
	k, err := s.kindFor(gvk)
	if err != nil {
		return fmt.Errorf("setting the scope of %s: %w", gvk, err)
	}
	if k.store.n > 0 {
		return fmt.Errorf("setting the scope of %s: it has objects", gvk)
	}
	k.namespaced = namespaced
	s.mapperStale = true
	return nil
}

// clusterScoped are the built-in cluster-scoped kinds.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Node"}: true, {Kind: "Namespace"}: true, {Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:                                                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
}

var objectType = reflect.TypeFor[client.Object]()

// typedKind adds and returns the kind of gvk if the scheme serves it, or
// returns nil.
func (s *Server) typedKind(gvk schema.GroupVersionKind) *kind {
	if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
		return nil
	}
	if k := s.kinds[gvk]; k != nil {
		return k
	}
	tk := protoKey{s.scheme, gvk}
	var k *kind
	if p, ok := protoKinds.Load(tk); ok {
		k = p.(*kind).fresh()
	} else {
		t, ok := s.scheme.AllKnownTypes()[gvk]
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if !ok || t.Kind() != reflect.Struct || !factsOf(t).object || !s.scheme.Recognizes(listGVK) {
			return nil
		}
		namespaced := !clusterScoped[gvk.GroupKind()] && gvk.Group != v1alpha1.GroupVersion.Group
		p := newKind(gvk, listGVK, namespaced, t)
		protoKinds.Store(tk, p)
		k = p.fresh()
	}
	s.kinds[gvk] = k
	s.lists[k.listGVK] = k
	s.mapperStale = true
	return k
}

// protoKinds holds, by scheme and GroupVersionKind, a kind as typedKind
// makes it for a scheme that serves it, never used itself: every server
// (a twin run's API server and each daemon's cache) takes a fresh copy
// of it, which saves working out its resource, list kind and Go type
// again. Only kinds served are kept: a scheme may learn a kind later,
// but never changes the Go type of one it knows (Scheme.AddKnownTypes
// panics).
var protoKinds sync.Map

type protoKey struct {
	scheme *runtime.Scheme
	gvk    schema.GroupVersionKind
}

// fresh returns a copy of the prototype kind p with empty stores.
func (p *kind) fresh() *kind {
	k := new(kind)
	*k = *p
	k.store = store{buckets: map[string]*bucket{}}
	k.indexes = map[string]*index{}
	return k
}

// kindFor returns the served kind of gvk or a meta.NoKindMatchError, the
// error a client sees when a CRD is not installed.
func (s *Server) kindFor(gvk schema.GroupVersionKind) (*kind, error) {
	k := s.kinds[gvk]
	if k == nil {
		k = s.typedKind(gvk)
	}
	if k == nil || !k.present {
		return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return k, nil
}

// kindForList returns the served item kind of a list GVK.
func (s *Server) kindForList(listGVK schema.GroupVersionKind) (*kind, error) {
	if k := s.lists[listGVK]; k != nil {
		return s.kindFor(k.gvk)
	}
	return s.kindFor(listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List")))
}

// restMapper returns a mapper of the kinds served now.
func (s *Server) restMapper() meta.RESTMapper {
	if s.mapperStale {
		gvks := make([]schema.GroupVersionKind, 0, len(s.kinds))
		for gvk, k := range s.kinds {
			if k.present {
				gvks = append(gvks, gvk)
			}
		}
		slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
		var gvs []schema.GroupVersion
		for _, gvk := range gvks {
			if !slices.Contains(gvs, gvk.GroupVersion()) {
				gvs = append(gvs, gvk.GroupVersion())
			}
		}
		m := meta.NewDefaultRESTMapper(gvs)
		for _, gvk := range gvks {
			scope := meta.RESTScopeRoot
			if s.kinds[gvk].namespaced {
				scope = meta.RESTScopeNamespace
			}
			m.Add(gvk, scope)
		}
		s.mapper, s.mapperStale = m, false
	}
	return s.mapper
}

// mapperView is the RESTMapper handed to clients: it follows kinds being
// added and removed.
type mapperView struct{ s *Server }

func (v mapperView) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return v.s.restMapper().KindFor(r)
}

func (v mapperView) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return v.s.restMapper().KindsFor(r)
}

func (v mapperView) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return v.s.restMapper().ResourceFor(r)
}

func (v mapperView) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return v.s.restMapper().ResourcesFor(r)
}

func (v mapperView) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return v.s.restMapper().RESTMapping(gk, versions...)
}

func (v mapperView) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return v.s.restMapper().RESTMappings(gk, versions...)
}

func (v mapperView) ResourceSingularizer(resource string) (string, error) {
	return v.s.restMapper().ResourceSingularizer(resource)
}

// emit queues the event of a write for the subscribers and, unless a
// delivery is under way further up the stack, delivers everything queued.
// obj is the stored object and old the one it replaced; both are handed
// over as they are, never to be modified.
func (s *Server) emit(t EventType, obj, old client.Object) {
	if len(s.subs) == 0 {
		return
	}
	s.pending = append(s.pending, Event{Type: t, Object: obj, Old: old})
	if s.delivering {
		return
	}
	s.delivering = true
	defer func() {
		clear(s.pending)
		s.pending = s.pending[:0]
		s.delivering = false
	}()
	for i := 0; i < len(s.pending); i++ {
		ev := s.pending[i]
		for _, sub := range s.subs {
			sub.fn(ev)
		}
	}
}
