package podorder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestByName(t *testing.T) {
	pod := func(ns, name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	items := []corev1.Pod{pod("b", "a"), pod("a", "z"), pod("a", "b")}
	got := ByName(items)
	want := []string{"a/b", "a/z", "b/a"}
	for i, p := range got {
		if p.Namespace+"/"+p.Name != want[i] {
			t.Fatalf("ByName: position %d is %s/%s, want %s", i, p.Namespace, p.Name, want[i])
		}
	}
	if got[0] != &items[2] {
		t.Fatal("ByName copied a pod: want pointers into items")
	}
	if items[0].Namespace != "b" {
		t.Fatal("ByName reordered items")
	}
}
