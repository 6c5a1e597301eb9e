package prefetch

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// Equal reports whether two progress reports say the same thing, so the
// daemon writes only changes.
func Equal(a, b []v1alpha1.PinnedSetProgress) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

// StatusPatch is the JSON merge patch that writes progress as the
// BootcNode's status.daemon.pinnedImages and nothing else. A merge patch
// replaces a list whole, so images and sets dropped from progress go; an
// empty progress removes the field.
func StatusPatch(progress []v1alpha1.PinnedSetProgress) ([]byte, error) {
	var v any
	if len(progress) > 0 {
		v = progress
	}
	return json.Marshal(map[string]any{"status": map[string]any{"daemon": map[string]any{"pinnedImages": v}}})
}
