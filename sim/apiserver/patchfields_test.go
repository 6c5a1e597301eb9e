package apiserver

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

type selfMarshaled struct{ A int }

func (selfMarshaled) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }

type emptyAsObject string

func (emptyAsObject) MarshalJSON() ([]byte, error) { return []byte(`{}`), nil }

type odd struct {
	metav1.TypeMeta `json:",inline"`
	Plain           int
	Named           int `json:"named,omitempty"`
	Str             int `json:"str,string"`
	Zero            int `json:"zero,omitzero"`
	Skipped         int `json:"-"`
	unexported      int
	Dup             int
	Dup2            int           `json:"Dup"`
	Odd             int           `json:"a b"`
	Self            emptyAsObject `json:"self,omitempty"`
	SelfPlain       emptyAsObject `json:"selfPlain"`
	Time            metav1.Time   `json:"time,omitempty"`
}

func TestPatchFieldsOf(t *testing.T) {
	_ = odd{}.unexported
	tests := []struct {
		t    reflect.Type
		want map[string]int
	}{
		{reflect.TypeFor[corev1.Node](), map[string]int{"metadata": 1, "spec": 2, "status": 3}},
		{reflect.TypeFor[v1alpha1.BootcNodePool](), map[string]int{"metadata": 1, "spec": 2, "status": 3}},
		{reflect.TypeFor[corev1.ConfigMap](), map[string]int{"metadata": 1, "immutable": 2, "data": 3, "binaryData": 4}},
		{reflect.TypeFor[odd](), map[string]int{"Plain": 1, "named": 2, "selfPlain": 11, "time": 12}},
		{reflect.TypeFor[selfMarshaled](), nil},
		{reflect.TypeFor[struct{ time.Time }](), nil}, // promoted MarshalJSON
	}
	for _, tt := range tests {
		if got := patchFieldsOf(tt.t); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("patchFieldsOf(%v) = %v, want %v", tt.t, got, tt.want)
		}
	}
}
