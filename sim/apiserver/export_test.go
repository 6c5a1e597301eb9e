package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// SetWholePatches turns the field-wise path of merge patches off (whole)
// or on.
func SetWholePatches(s *Server, whole bool) { s.wholePatches = whole }

// PatchWays is a merge patch applied to a stored object in several ways.
type PatchWays struct {
	// Fields is the object mergeFields gives, nil when it falls back.
	Fields client.Object
	// Changed are the top-level fields mergeFields says differ, by Go
	// name; Differs are those that differ as update compares them
	// (serialEqual, metadata but for what update takes from the stored
	// object), found by comparing Fields with the stored object.
	Changed, Differs []string
	// Whole is the object applyPatch gives without mergeFields, or
	// WholeErr its error.
	Whole    client.Object
	WholeErr error
	// Reference is the whole object encoded, patched by jsonpatch and
	// decoded, nothing left out; nil when jsonpatch fails.
	Reference client.Object
}

// MergePatchWays applies the merge patch data to the stored object of obj's
// kind, namespace and name, storing nothing.
func MergePatchWays(s *Server, obj client.Object, data []byte, status bool) (PatchWays, error) {
	var w PatchWays
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return w, err
	}
	k, err := s.kindFor(gvk)
	if err != nil {
		return w, err
	}
	e := k.store.get(objKey{obj.GetNamespace(), obj.GetName()})
	if e == nil {
		return w, notFound(k, obj.GetName())
	}
	if in, d, ok := k.mergeFields(e, data); ok {
		w.Fields = in
		if d == anyDiff {
			return w, fmt.Errorf("mergeFields gave an inexact diff")
		}
		t := reflect.TypeOf(in).Elem()
		for i := range t.NumField() {
			if fieldMask(d).has(i) {
				w.Changed = append(w.Changed, t.Field(i).Name)
			}
		}
		w.Differs = differs(e.obj, in)
	}
	w.Whole, w.WholeErr = s.patchWhole(k, e, types.MergePatchType, data, status)
	orig, err := json.Marshal(e.obj)
	if err != nil {
		return w, err
	}
	if patched, err := jsonpatch.MergePatch(orig, data); err == nil {
		if w.Reference, err = k.decode(patched); err != nil {
			w.Reference = nil
		}
	}
	return w, nil
}

// differs returns the top-level fields, by Go name, in which in differs
// from stored as update compares them: with serialEqual, after taking the
// server-managed metadata from stored.
func differs(stored, in client.Object) []string {
	next := in.DeepCopyObject().(client.Object)
	takeServerMeta(next, stored)
	a := reflect.ValueOf(stored).Elem()
	changed := changedFields(a, reflect.ValueOf(next).Elem())
	var out []string
	for i := range a.NumField() {
		if changed.has(i) {
			out = append(out, a.Type().Field(i).Name)
		}
	}
	return out
}
