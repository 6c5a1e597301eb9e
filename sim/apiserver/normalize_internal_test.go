package apiserver

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Types that contain themselves, directly and through another type, with
// times in maps, slices and pointers: every time is reached.
type treeA struct {
	At       metav1.Time
	Children []treeB
	ByName   map[string]treeA
	Unset    *treeA
}

type treeB struct {
	Next  *treeA
	Micro metav1.MicroTime
}

type noTimes struct {
	Name  string
	Items map[string][]int
}

func TestSerialiseTimesReachesEveryTime(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 1, 987654321, time.UTC)
	sec, micro := at.Truncate(time.Second), at.Truncate(time.Microsecond)
	v := &treeA{
		At: metav1.Time{Time: at},
		Children: []treeB{{
			Micro: metav1.MicroTime{Time: at},
			Next:  &treeA{At: metav1.Time{Time: at}, ByName: map[string]treeA{"x": {At: metav1.Time{Time: at}}}},
		}},
	}
	serialiseTimes(v)
	switch {
	case !v.At.Time.Equal(sec):
		t.Errorf("top time %v", v.At)
	case !v.Children[0].Micro.Time.Equal(micro):
		t.Errorf("micro time %v", v.Children[0].Micro)
	case !v.Children[0].Next.At.Time.Equal(sec):
		t.Errorf("time through a pointer %v", v.Children[0].Next.At)
	case !v.Children[0].Next.ByName["x"].At.Time.Equal(sec):
		t.Errorf("time in a map value %v", v.Children[0].Next.ByName["x"].At)
	}
	if timeWalkerOf(reflect.TypeFor[noTimes]()) != nil {
		t.Errorf("a type without times gets a walker")
	}
}

// TypeIDOf is the address of the type descriptor reflect.TypeOf returns.
func TestTypeIDOfIsReflectsType(t *testing.T) {
	for _, v := range []any{nil, 1, "a", &metav1.Time{}, metav1.Time{}, map[string]int{}, []byte{}, (*int)(nil), struct{}{}} {
		var want TypeID
		if rt := reflect.TypeOf(v); rt != nil {
			want = TypeID(reflect.ValueOf(rt).Pointer())
		}
		if got := TypeIDOf(v); got != want {
			t.Errorf("TypeIDOf(%#v) = %#x, want %#x", v, got, want)
		}
	}
}
