package prefetch

import (
	"testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

func TestStatusPatch(t *testing.T) {
	a := img(1)
	for _, tc := range []struct {
		progress []v1alpha1.PinnedSetProgress
		want     string
	}{
		{nil, `{"status":{"daemon":{"pinnedImages":null}}}`},
		{[]v1alpha1.PinnedSetProgress{progressOf("web", 2, present(a))},
			`{"status":{"daemon":{"pinnedImages":[{"name":"web","generation":2,"present":1,"images":[{"image":"` + a + `","state":"Present"}]}]}}}`},
	} {
		got, err := StatusPatch(tc.progress)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("StatusPatch = %s\nwant %s", got, tc.want)
		}
	}
}

func TestEqual(t *testing.T) {
	a := img(1)
	p := []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))}
	q := []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))}
	if !Equal(p, q) || !Equal(nil, []v1alpha1.PinnedSetProgress{}) {
		t.Error("equal progress reported different")
	}
	q[0].Images[0].Attempts = 2
	if Equal(p, q) {
		t.Error("different progress reported equal")
	}
}
