package apiserver

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file keeps metadata.managedFields for one part of an object: the
// keys of metadata.annotations, which is what bootroll reads of them (a
// protection annotation another field manager has written is someone
// else's, and stays: controller/karpenter.ForeignOwned). It follows
// kube-apiserver's rules for create, update and patch (not apply):
//   - the manager of a write owns every annotation key it adds or whose
//     value it changes, and other managers lose it;
//   - a key removed is owned by no one;
//   - a write that leaves a key as it was changes no ownership, and a
//     manager left owning nothing loses its entry.
//
// The manager is the request's fieldManager, or the client's default: on
// a real cluster the prefix of its user agent, i.e. the binary's name.
// The conformance test compares the owners of each key with a real
// kube-apiserver's; the other fields of an entry (operation, time, the
// fields it owns outside metadata.annotations) are not modelled.

// Default field managers of the twin's clients: the bootroll binaries
// (the controller's and the daemon's writes share the twin's client; only
// the controller writes annotations) and the twin's own models.
const (
	ControllerManager = "bootroll-controller"
	AdminManager      = "twin"
)

// annotationOwners returns who owns each annotation key by managedFields.
func annotationOwners(entries []metav1.ManagedFieldsEntry) map[string]string {
	owners := map[string]string{}
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var f struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(e.FieldsV1.Raw, &f) != nil {
			continue
		}
		for k := range f.Metadata.Annotations {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				owners[key] = e.Manager
			}
		}
	}
	return owners
}

// manageAnnotations sets next's managedFields for a write by manager that
// turns cur (nil for a create) into next: cur's entries, with the
// ownership of the annotation keys the write added, changed or removed
// moved as kube-apiserver moves it. apiVersion is next's.
func manageAnnotations(cur, next client.Object, manager, apiVersion string, now metav1.Time) {
	var before map[string]string
	var entries []metav1.ManagedFieldsEntry
	if cur != nil {
		before, entries = cur.GetAnnotations(), cur.GetManagedFields()
	} else {
		entries = next.GetManagedFields()
	}
	after := next.GetAnnotations()
	if cur != nil && maps.Equal(before, after) {
		next.SetManagedFields(entries)
		return
	}
	owners := annotationOwners(entries)
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
		if e.FieldsV1 != nil && annotationEntry(e) {
			continue // rebuilt below
		}
		out = append(out, e)
	}
	for _, m := range slices.Sorted(maps.Keys(byManager)) {
		fields := map[string]struct{}{}
		for _, k := range byManager[m] {
			fields["f:"+k] = struct{}{}
		}
		raw, _ := json.Marshal(map[string]any{"f:metadata": map[string]any{"f:annotations": fields}})
		t := now
		out = append(out, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: apiVersion,
			Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw}})
	}
	next.SetManagedFields(out)
}

// annotationEntry reports whether e is an entry manageAnnotations builds:
// its fields are annotation keys only.
func annotationEntry(e metav1.ManagedFieldsEntry) bool {
	var f map[string]map[string]json.RawMessage
	if json.Unmarshal(e.FieldsV1.Raw, &f) != nil || len(f) != 1 {
		return false
	}
	m, ok := f["f:metadata"]
	if !ok || len(m) != 1 {
		return false
	}
	_, ok = m["f:annotations"]
	return ok
}
