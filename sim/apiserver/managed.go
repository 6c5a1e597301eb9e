package apiserver

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file keeps metadata.managedFields for the fields bootroll reads the
// owners of: the keys of metadata.annotations (a protection annotation
// another field manager has written is someone else's, and stays:
// controller/karpenter.ForeignOwned) and a Node's spec.unschedulable (a
// cordon another manager wrote during a slot is someone else's, and stays:
// controller/node's release). It follows kube-apiserver's rules for
// create, update and patch (not apply):
//   - the manager of a write owns every tracked field it adds or whose
//     value it changes, and other managers lose it;
//   - a field removed (an annotation deleted, unschedulable set false,
//     which is its zero value and not stored) is owned by no one;
//   - a write that leaves a field as it was changes no ownership, and a
//     manager left owning nothing loses its entry.
//
// The manager is the request's fieldManager, or the client's default: on
// a real cluster the prefix of its user agent, i.e. the binary's name.
// The conformance test compares the owners of each field with a real
// kube-apiserver's; the other fields of an entry (operation, time, the
// fields it owns outside the tracked ones) are not modelled.

// Default field managers of the twin's clients: the bootroll binaries
// (the controller's and the daemon's writes share the twin's client; only
// the controller writes annotations and cordons) and the twin's own models.
const (
	ControllerManager = "bootroll-controller"
	AdminManager      = "twin"
)

// unschedulableField is the owners' key of a Node's spec.unschedulable;
// annotation keys are keyed by themselves (an annotation key has no space).
const unschedulableField = "spec unschedulable"

// managedEntry is the part of a FieldsV1 set this file models.
type managedEntry struct {
	Metadata *struct {
		Annotations map[string]json.RawMessage `json:"f:annotations"`
	} `json:"f:metadata,omitempty"`
	Spec *struct {
		Unschedulable *json.RawMessage `json:"f:unschedulable"`
	} `json:"f:spec,omitempty"`
}

// fieldOwners returns who owns each tracked field by managedFields.
func (s *Server) fieldOwners(entries []metav1.ManagedFieldsEntry) map[string]string {
	owners := map[string]string{}
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		f := s.fieldsOf(e.FieldsV1.Raw)
		if !f.parsed {
			continue
		}
		for _, key := range f.annotations {
			owners[key] = e.Manager
		}
		if f.unschedulable {
			owners[unschedulableField] = e.Manager
		}
	}
	return owners
}

// trackedSet is what a FieldsV1 set says of the tracked fields.
type trackedSet struct {
	// parsed is set when the set decodes as a managedEntry; annotations
	// are then the annotation keys it holds, unschedulable whether it
	// holds a Node's spec.unschedulable.
	parsed        bool
	annotations   []string
	unschedulable bool
	// modelled is modelledEntry's answer.
	modelled bool
}

// maxTrackedSets bounds Server.trackedSets: past it, the cache starts
// again (a run meets a few dozen sets).
const maxTrackedSets = 1024

// fieldsOf returns what the FieldsV1 set raw says of the tracked fields.
// Sets are decoded once per server: the same few sets (one per manager
// and set of annotation keys) come back on every write that changes a
// tracked field, and decoding them was most of the cost of such a write.
func (s *Server) fieldsOf(raw []byte) *trackedSet {
	if f, ok := s.trackedSets[string(raw)]; ok {
		return f
	}
	f := &trackedSet{modelled: modelledEntry(raw)}
	var m managedEntry
	if json.Unmarshal(raw, &m) == nil {
		f.parsed = true
		if m.Metadata != nil {
			for k := range m.Metadata.Annotations {
				if key, ok := strings.CutPrefix(k, "f:"); ok {
					f.annotations = append(f.annotations, key)
				}
			}
		}
		f.unschedulable = m.Spec != nil && m.Spec.Unschedulable != nil
	}
	if s.trackedSets == nil || len(s.trackedSets) >= maxTrackedSets {
		s.trackedSets = map[string]*trackedSet{}
	}
	s.trackedSets[string(raw)] = f
	return f
}

// trackedFields returns the tracked fields of o that are set, with their
// values.
func trackedFields(o client.Object) map[string]string {
	out := maps.Clone(o.GetAnnotations())
	if n, ok := o.(*corev1.Node); ok && n.Spec.Unschedulable {
		if out == nil {
			out = map[string]string{}
		}
		out[unschedulableField] = "true"
	}
	return out
}

// sameTracked reports whether a write from cur to next leaves every
// tracked field as it was (the common case, checked without allocating).
func sameTracked(cur, next client.Object) bool {
	if !maps.Equal(cur.GetAnnotations(), next.GetAnnotations()) {
		return false
	}
	if a, ok := cur.(*corev1.Node); ok {
		if b, ok := next.(*corev1.Node); ok && a.Spec.Unschedulable != b.Spec.Unschedulable {
			return false
		}
	}
	return true
}

// manageAnnotations sets next's managedFields for a write by manager that
// turns cur (nil for a create) into next, of kind kd: cur's entries, with
// the ownership of the tracked fields the write added, changed or removed
// moved as kube-apiserver moves it.
func (s *Server) manageAnnotations(kd *kind, cur, next client.Object, manager string) {
	var entries []metav1.ManagedFieldsEntry
	if cur != nil {
		entries = cur.GetManagedFields()
		if sameTracked(cur, next) {
			next.SetManagedFields(entries)
			return
		}
	} else {
		entries = next.GetManagedFields()
	}
	var before map[string]string
	if cur != nil {
		before = trackedFields(cur)
	}
	after := trackedFields(next)
	owners := s.fieldOwners(entries)
	changed := false
	for k, v := range after {
		if old, ok := before[k]; (!ok || old != v) && owners[k] != manager {
			owners[k] = manager
			changed = true
		}
	}
	for k := range owners {
		if _, ok := after[k]; !ok {
			delete(owners, k)
			changed = true
		}
	}
	if !changed {
		next.SetManagedFields(entries)
		return
	}
	byManager := map[string][]string{}
	for k, m := range owners {
		byManager[m] = append(byManager[m], k)
	}
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.FieldsV1 != nil && s.fieldsOf(e.FieldsV1.Raw).modelled {
			continue // rebuilt below
		}
		out = append(out, e)
	}
	apiVersion, now := kd.gvk.GroupVersion().String(), s.now()
	for _, m := range slices.Sorted(maps.Keys(byManager)) {
		raw := fieldsV1Of(byManager[m])
		t := now
		out = append(out, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: apiVersion,
			Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}})
	}
	next.SetManagedFields(out)
}

// modelledEntry reports whether the FieldsV1 set raw is one
// manageAnnotations builds: its fields are tracked fields only.
func modelledEntry(raw []byte) bool {
	var f map[string]map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil || len(f) == 0 {
		return false
	}
	for top, m := range f {
		switch top {
		case "f:metadata":
			if _, ok := m["f:annotations"]; !ok || len(m) != 1 {
				return false
			}
		case "f:spec":
			if _, ok := m["f:unschedulable"]; !ok || len(m) != 1 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// fieldsV1Of returns the FieldsV1 set of the tracked fields keys (with
// unschedulableField for spec.unschedulable, annotation keys for the
// others) as json.Marshal encodes it from maps: members sorted by key,
// {"f:metadata":{"f:annotations":{"f:<key>":{},...}},"f:spec":{"f:unschedulable":{}}},
// each part present when a key asks for it. Encoding the maps through
// encoding/json was a third of manageAnnotations.
func fieldsV1Of(keys []string) []byte {
	var annotations []string
	spec := false
	for _, k := range keys {
		if k == unschedulableField {
			spec = true
			continue
		}
		annotations = append(annotations, "f:"+k)
	}
	slices.Sort(annotations)
	annotations = slices.Compact(annotations)
	buf := make([]byte, 0, 64)
	buf = append(buf, '{')
	if len(annotations) > 0 {
		buf = append(buf, `"f:metadata":{"f:annotations":{`...)
		for i, a := range annotations {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendKey(buf, a)
			buf = append(buf, '{', '}')
		}
		buf = append(buf, '}', '}')
	}
	if spec {
		if len(annotations) > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"f:spec":{"f:unschedulable":{}}`...)
	}
	return append(buf, '}')
}
