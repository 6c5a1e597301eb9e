package apiserver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The types below exercise what patchObject meets in API types and more:
// recursion through values and pointers (and a type that contains
// itself), leaves of every sort, embedded structs, names that differ only
// in case, and fields patchFieldsOf leaves out.

type nestedInner struct {
	A     string             `json:"a,omitempty"`
	N     int32              `json:"n,omitempty"`
	U     uint8              `json:"u,omitempty"`
	F     float64            `json:"f,omitempty"`
	P     *int64             `json:"p,omitempty"`
	B     *bool              `json:"b,omitempty"`
	T     *metav1.Time       `json:"t,omitempty"`
	Q     resource.Quantity  `json:"q"` // its zero value is not in round-trip form
	I     intstr.IntOrString `json:"i,omitempty"`
	M     map[string]string  `json:"m,omitempty"`
	MI    map[string]int     `json:"mi,omitempty"`
	L     []string           `json:"l,omitempty"`
	Any   any                `json:"any,omitempty"`
	Raw   json.RawMessage    `json:"raw,omitempty"`
	Bytes []byte             `json:"bytes,omitempty"`
	Deep  *nestedInner       `json:"deep,omitempty"`
}

type NestedEmbedded struct {
	E      string `json:"e,omitempty"`
	Shadow string `json:"shadow,omitempty"`
}

type nestedWithEmbedded struct {
	NestedEmbedded
	Shadow string      `json:"shadow,omitempty"`
	X      nestedInner `json:"x"`
}

type nestedCase struct {
	Lower string `json:"v,omitempty"`
	Upper string `json:"V,omitempty"`
}

type nestedOdd struct {
	S    int        `json:"s,string"`
	Z    nestedCase `json:"z,omitzero"`
	Self objString  `json:"self,omitempty"`
	PP   **string   `json:"pp,omitempty"`
}

// objString is a string encoded as {"s":...}: an empty one is left out
// with omitempty, but encodes alone as an object.
type objString string

func (o objString) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"s": string(o)})
}

func (o *objString) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*o = objString(m["s"])
	return nil
}

type nestedRoot struct {
	In   nestedInner         `json:"in"`
	Ptr  *nestedInner        `json:"ptr,omitempty"`
	W    nestedWithEmbedded  `json:"w"`
	WP   *nestedWithEmbedded `json:"wp,omitempty"`
	C    nestedCase          `json:"c"`
	Odd  nestedOdd           `json:"odd"`
	Time metav1.Time         `json:"time"`
	Tail string              `json:"tail,omitempty"`
}

// nestedRoots are values of nestedRoot in JSON round-trip form.
func nestedRoots(t *testing.T) []nestedRoot {
	at := metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := "s"
	ps := &s
	full := nestedInner{
		A: "a", N: 3, U: 4, F: 0.5, P: new(int64(7)), B: new(false), T: &at,
		Q: resource.MustParse("1Gi"), I: intstr.FromString("10%"),
		M: map[string]string{"k": "v", "a.b/c": "d"}, MI: map[string]int{"k": 1},
		L: []string{"x", "y"}, Any: map[string]any{"x": []any{1.0, "y"}}, Raw: json.RawMessage(`{"r":1}`),
		Bytes: []byte{0, 1}, Deep: &nestedInner{A: "deep", Q: resource.MustParse("2")},
	}
	roots := []nestedRoot{
		{},
		{
			In: full, Ptr: &full,
			W:    nestedWithEmbedded{NestedEmbedded: NestedEmbedded{E: "e", Shadow: "inner"}, Shadow: "outer", X: full},
			WP:   &nestedWithEmbedded{Shadow: "wp"},
			C:    nestedCase{Lower: "l", Upper: "u"},
			Odd:  nestedOdd{S: 5, Z: nestedCase{Lower: "z"}, Self: "x", PP: &ps},
			Time: at, Tail: "t",
		},
	}
	for i := range roots {
		b, err := json.Marshal(&roots[i])
		if err != nil {
			t.Fatal(err)
		}
		roots[i] = nestedRoot{}
		if err := json.Unmarshal(b, &roots[i]); err != nil {
			t.Fatal(err)
		}
	}
	return roots
}

var nestedPatches = []string{
	`{}`,
	`{"in":{"a":"x","n":5,"u":255,"f":1.5,"p":7,"b":true,"t":"2030-01-01T00:00:00Z"}}`,
	`{"in":{"a":null,"p":null,"b":null,"t":null,"q":null,"deep":null}}`,
	`{"in":{"m":{"k":null,"n":"v"},"mi":{"k":2,"z":null},"l":["a",null]}}`,
	`{"in":{"m":{"k":"v"},"mi":{"k":1}}}`,
	`{"in":{"m":{}},"ptr":{"m":{"x":null}}}`,
	`{"in":{"q":"2Gi","i":"50%","any":{"x":[1,{"y":null}],"z":null},"raw":{"r":null,"s":1},"bytes":"AAE="}}`,
	`{"in":{"i":5,"raw":[1,null],"any":"s"}}`,
	`{"ptr":{"a":"x"}}`,
	`{"ptr":{}}`,
	`{"ptr":null}`,
	`{"ptr":{"deep":{"q":"1","deep":{"a":"x","deep":{}}}}}`,
	`{"ptr":{"a":null,"t":null,"q":"3"},"wp":{"x":{"a":"y"}}}`,
	`{"in":{"deep":{"deep":{"a":"x","q":"3"}}}}`,
	`{"w":{"e":"promoted","shadow":"outer2"}}`,
	`{"w":{"shadow":"outer2","x":{"a":"b"}}}`,
	`{"w":{"NestedEmbedded":{"e":"x"}}}`,
	`{"wp":{"e":"x"}}`,
	`{"wp":{"shadow":null,"x":{"q":"5"}}}`,
	`{"c":{"v":"l2","V":"u2"}}`,
	`{"c":{"v":"x"}}`,
	`{"c":{"Lower":"x"}}`,
	`{"odd":{"s":"6"}}`,
	`{"odd":{"z":{"v":"x"}}}`,
	`{"odd":{"self":{"a":1}}}`,
	`{"odd":{"self":{"s":"y"}}}`,
	`{"odd":{"self":{"s":null}}}`,
	`{"odd":{"pp":"t"}}`,
	`{"odd":{"pp":null}}`,
	`{"time":"2031-01-01T00:00:00Z","tail":null}`,
	`{"time":null}`,
	`{"in":{"n":2147483648}}`,
	`{"in":{"u":-1}}`,
	`{"in":{"u":256}}`,
	`{"in":{"n":1.0}}`,
	`{"in":{"a":"\u00e9\n","m":{"\u00e9":"\ud83d\ude00","<":">"}}}`,
	"{\"in\":{\"a\":\"\xff\",\"m\":{\"\xfe\":\"\xfd\"}}}",
	`{"in":{"a":"1","a":"2"}}`,
	`{"in":{"deep":{"a":"1"},"deep":{"n":2}}}`,
	`{"in":"str"}`,
	`{"in":[1]}`,
	`{"ptr":[{"a":null}]}`,
	`{"ptr":"x"}`,
	`{"in":{"m":{"a":1}}}`,
	`{"in":{"m":[]}}`,
	`{"in":{"t":"yesterday"}}`,
	`{"in":{"t":{"x":1}}}`,
	`{"unknown":1,"in":{"a":"z"}}`,
}

// TestPatchObjectMatchesWhole checks patchObject on nestedRoot against
// encoding the whole value, merging with jsonpatch and decoding into a zero
// value: the same result (or both fail), the fields reported changed are
// those that differ, and the stored value is left alone.
func TestPatchObjectMatchesWhole(t *testing.T) {
	s := structInfoOf(reflect.TypeFor[nestedRoot]())
	if s == nil {
		t.Fatal("nestedRoot is not patched field by field")
	}
	var fast, failed int
	for ri, stored := range nestedRoots(t) {
		for _, patch := range nestedPatches {
			before, err := json.Marshal(&stored)
			if err != nil {
				t.Fatal(err)
			}
			snapshot := reflectCopy(stored)

			out := stored
			var p patcher
			changed, ok := p.patchObject(s, reflect.ValueOf(&out).Elem(), reflect.ValueOf(&stored).Elem(), []byte(patch))

			var want nestedRoot
			merged, werr := jsonpatch.MergePatch(before, []byte(patch))
			if werr == nil {
				werr = json.Unmarshal(merged, &want)
			}
			switch {
			case !ok && werr == nil:
				t.Errorf("root %d, %s: field by field failed, whole gives %s", ri, patch, showJSONInternal(want))
				continue
			case ok && werr != nil:
				t.Errorf("root %d, %s: field by field gave %s, whole failed: %v", ri, patch, showJSONInternal(out), werr)
				continue
			case !ok:
				failed++
			default:
				fast++
				if !reflect.DeepEqual(out, want) {
					t.Errorf("root %d, %s:\n got %s\nwant %s", ri, patch, showJSONInternal(out), showJSONInternal(want))
				}
				a, b := reflect.ValueOf(stored), reflect.ValueOf(out)
				for i := range a.NumField() {
					differs := !serialEqual.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface())
					if differs != (changed&(1<<uint(i)) != 0) {
						t.Errorf("root %d, %s: field %s differs %v, reported changed %v", ri, patch, a.Type().Field(i).Name, differs, !differs)
					}
				}
			}
			if !reflect.DeepEqual(stored, snapshot) {
				t.Errorf("root %d, %s: the stored value changed:\n got %s\nwant %s", ri, patch, showJSONInternal(stored), showJSONInternal(snapshot))
			}
		}
	}
	t.Logf("field by field %d, failed %d", fast, failed)
}

// reflectCopy returns a deep copy of v through JSON and back, then checks
// it is equal: the roots are in round-trip form.
func reflectCopy(v nestedRoot) nestedRoot {
	b, err := json.Marshal(&v)
	if err != nil {
		panic(err)
	}
	var out nestedRoot
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func showJSONInternal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestStructInfo(t *testing.T) {
	tests := []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[metav1.ObjectMeta](), true},
		{reflect.TypeFor[nestedRoot](), true},
		{reflect.TypeFor[nestedWithEmbedded](), true},
		{reflect.TypeFor[metav1.Time](), false},        // marshals itself
		{reflect.TypeFor[resource.Quantity](), false},  // marshals itself
		{reflect.TypeFor[intstr.IntOrString](), false}, // marshals itself
		{reflect.TypeFor[struct{ a int }](), false},    // unexported field
		{reflect.TypeFor[*nestedRoot](), false},
		{reflect.TypeFor[map[string]string](), false},
	}
	for _, tt := range tests {
		if got := structInfoOf(tt.t) != nil; got != tt.want {
			t.Errorf("structInfoOf(%v) != nil is %v, want %v", tt.t, got, tt.want)
		}
	}
	in := structInfoOf(reflect.TypeFor[nestedInner]())
	deep := in.fields[in.byName["deep"]]
	if deep.sub != in || !deep.ptr {
		t.Errorf("nestedInner.Deep: sub %p ptr %v, want %p true", deep.sub, deep.ptr, in)
	}
	w := structInfoOf(reflect.TypeFor[nestedWithEmbedded]())
	if _, ok := w.byName["e"]; ok {
		t.Errorf("a promoted field is patched on its own")
	}
}
