package twin

import (
	"slices"
	"testing"
	"time"

	"github.com/bootroll/bootroll/sim/scenario"
)

func TestMarkersNameTheAction(t *testing.T) {
	got := markers([]scenario.Event{
		{At: time.Minute, SetPoolImage: &scenario.SetPoolImage{Pool: "workers"}},
		{At: 2 * time.Minute, DeleteNode: &scenario.NodeRef{Node: "workers-3"}},
	})
	want := []Marker{{time.Minute, "setPoolImage workers"}, {2 * time.Minute, "deleteNode workers-3"}}
	if !slices.Equal(got, want) {
		t.Errorf("markers = %+v, want %+v", got, want)
	}
}
