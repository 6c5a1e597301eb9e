package apiserver

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

var _ client.FieldIndexer = (*Server)(nil)

// IndexField indexes the objects of obj's kind by field, with the values
// extract returns for each, as controller-runtime's cache does: List with
// client.MatchingFields{field: value} then reads only the matching objects.
// Objects stored already are indexed now; every later write re-extracts.
// extract must not modify the object it is given. The Server is a
// client.FieldIndexer, so the indexes the manager registers can be
// registered here by the same code.
func (s *Server) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return fmt.Errorf("indexing %q: %w", field, err)
	}
	k, err := s.kindFor(gvk)
	if err != nil {
		return fmt.Errorf("indexing %q of %s: %w", field, gvk, err)
	}
	if k.indexes[field] != nil {
		return fmt.Errorf("indexing %q of %s: indexer conflict: the field is indexed already", field, gvk)
	}
	ix := &index{pos: len(k.ordered), extract: extract, byKey: map[indexKey]*entrySet{}}
	k.indexes[field] = ix
	k.ordered = append(k.ordered, ix)
	for _, e := range k.store.list("") {
		k.reindexField(e, ix, e.obj)
	}
	return nil
}
