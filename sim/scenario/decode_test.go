package scenario

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestDecodeAPIDuration reads the API's metav1.Duration as a Go duration
// string, as a time.Duration field is read.
func TestDecodeAPIDuration(t *testing.T) {
	type holder struct {
		D metav1.Duration  `json:"d"`
		P *metav1.Duration `json:"p"`
	}
	decode := func(doc string) (holder, string) {
		var root yaml.Node
		if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
			t.Fatal(err)
		}
		var h holder
		d := &decoder{pos: newPositions("t.yaml", nil), budget: maxDecodeNodes}
		d.value(root.Content[0], reflect.ValueOf(&h).Elem(), "", 1)
		if err := d.pos.result(); err != nil {
			return h, err.Error()
		}
		return h, ""
	}
	got, msg := decode("d: 1h30m\np: 90s\n")
	if msg != "" {
		t.Fatal(msg)
	}
	if want := (holder{D: metav1.Duration{Duration: 90 * time.Minute}, P: &metav1.Duration{Duration: 90 * time.Second}}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	_, msg = decode("d: 10 minutes\n")
	if want := `t.yaml:1: d: invalid duration "10 minutes"`; !strings.HasPrefix(msg, want) {
		t.Errorf("got %q, want prefix %q", msg, want)
	}
	if s := (&schemaGen{}).typeSchema(metaDurationType); s["pattern"] != durationSchemaPattern {
		t.Errorf("schema of metav1.Duration = %v, want a duration string", s)
	}
}

// crdSchema is the part of a CRD's OpenAPI schema the API rules table
// states.
type crdSchema struct {
	Properties map[string]crdSchema `yaml:"properties"`
	Items      *crdSchema           `yaml:"items"`
	Enum       []string             `yaml:"enum"`
	Minimum    *float64             `yaml:"minimum"`
	Maximum    *float64             `yaml:"maximum"`
	Required   []string             `yaml:"required"`
}

// TestAPIRulesMatchCRD holds apiEnums and apiTags to the generated
// BootcNodePool CRD: every API type the format uses has, field by field,
// the enum, minimum, maximum and required keys the CRD has.
func TestAPIRulesMatchCRD(t *testing.T) {
	b, err := os.ReadFile("../../config/crd/bases/bootroll.dev_bootcnodepools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema crdSchema `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	var spec crdSchema
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			spec = v.Schema.OpenAPIV3Schema.Properties["spec"]
		}
	}
	// Where each API type the format uses sits in the CRD.
	for typ, s := range map[reflect.Type]crdSchema{
		reflect.TypeFor[v1alpha1.FailurePolicy]():     spec.Properties["failurePolicy"],
		reflect.TypeFor[v1alpha1.KarpenterOptions]():  spec.Properties["karpenter"],
		reflect.TypeFor[v1alpha1.MaintenanceWindow](): *spec.Properties["windows"].Items,
		reflect.TypeFor[v1alpha1.RolloutSpec]():       spec.Properties["rollout"],
		reflect.TypeFor[v1alpha1.DrainSpec]():         spec.Properties["drain"],
	} {
		fs := fieldsOf(typ)
		if got, want := fieldNames(fs), slices.Sorted(maps.Keys(s.Properties)); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Errorf("%s: fields %v, CRD has %v", typ.Name(), got, want)
		}
		for _, f := range fs {
			p := s.Properties[f.name]
			et := f.typ
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Slice && p.Items != nil {
				et, p = et.Elem(), *p.Items
			}
			where := typ.Name() + "." + f.goName
			if got := enumOf(et); !slices.Equal(got, p.Enum) {
				t.Errorf("%s: enum %v, CRD has %v", where, got, p.Enum)
			}
			if !reflect.DeepEqual(f.min, p.Minimum) {
				t.Errorf("%s: minimum %v, CRD has %v", where, deref(f.min), deref(p.Minimum))
			}
			if !reflect.DeepEqual(f.max, p.Maximum) {
				t.Errorf("%s: maximum %v, CRD has %v", where, deref(f.max), deref(p.Maximum))
			}
			if got, want := f.required, slices.Contains(s.Required, f.name); got != want {
				t.Errorf("%s: required %v, CRD says %v", where, got, want)
			}
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
