package pinned

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestMirrorSecretKeepsType: both pull-secret types the kubelet reads are
// mirrored as they are (type and key), and a source that changes type
// replaces the mirror, whose type cannot be updated.
func TestMirrorSecretKeepsType(t *testing.T) {
	ctx := context.Background()
	const ns = "bootroll-system"
	dockercfg := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Type: corev1.SecretTypeDockercfg,
		Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"quay.io":{"auth":"dTpw"}}`), "other": []byte("x")}}
	c := fakeapi.Client(t, dockercfg)
	r := New(c, options.Options{SecretNamespace: ns})
	set := &v1alpha1.PinnedImageSet{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}
	ref := &v1alpha1.SecretReference{Namespace: ns, Name: "creds"}

	check := func(wantType corev1.SecretType, wantData map[string][]byte) {
		t.Helper()
		m, err := r.mirrorSecret(ctx, set, ref)
		if err != nil {
			t.Fatalf("mirrorSecret: %v", err)
		}
		var got corev1.Secret
		if err := c.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Type != wantType {
			t.Errorf("mirror type %s, want %s", got.Type, wantType)
		}
		if diff := cmp.Diff(wantData, got.Data); diff != "" {
			t.Errorf("mirror data (-want +got):\n%s", diff)
		}
	}
	check(corev1.SecretTypeDockercfg, map[string][]byte{corev1.DockerConfigKey: dockercfg.Data[corev1.DockerConfigKey]})

	// The source is replaced by a dockerconfigjson secret of the same name.
	if err := c.Delete(ctx, dockercfg); err != nil {
		t.Fatal(err)
	}
	json := []byte(`{"auths":{"quay.io":{"auth":"dTpw"}}}`)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: json}}); err != nil {
		t.Fatal(err)
	}
	check(corev1.SecretTypeDockerConfigJson, map[string][]byte{corev1.DockerConfigJsonKey: json})
}
