package scenario

import (
	"reflect"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
