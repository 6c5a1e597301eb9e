package cri

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestAuthFor: the matched entry becomes the CRI's credentials, named by
// the registry of the ref; the matching rules themselves are
// pullsecret.Keychain's and tested there.
func TestAuthFor(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	const digestRef = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name    string
		config  string
		ref     string
		want    *Auth
		wantErr string
	}{
		{
			name:   "username and password",
			config: `{"auths":{"registry.example.com:5000":{"username":"u","password":"p"}}}`,
			ref:    "registry.example.com:5000/apps/web" + digestRef,
			want:   &Auth{Username: "u", Password: "p", ServerAddress: "registry.example.com:5000"},
		},
		{
			name:   "auth field is split",
			config: `{"auths":{"https://registry.example.com/v1/":{"auth":"` + b64("user:pa:ss") + `"}}}`,
			ref:    "registry.example.com/apps/web" + digestRef,
			want:   &Auth{Username: "user", Password: "pa:ss", ServerAddress: "registry.example.com"},
		},
		{
			name:   "docker hub v1 key matches an implicit registry",
			config: `{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`,
			ref:    "library/busybox" + digestRef,
			want:   &Auth{Username: "u", Password: "p", ServerAddress: "index.docker.io"},
		},
		{
			name:   "identity token",
			config: `{"auths":{"quay.io":{"identitytoken":"tok"}}}`,
			ref:    "quay.io/org/app" + digestRef,
			want:   &Auth{IdentityToken: "tok", ServerAddress: "quay.io"},
		},
		{
			name:   "longest path prefix wins",
			config: `{"auths":{"registry.example.com":{"username":"all","password":"1"},"registry.example.com/team":{"username":"team","password":"2"}}}`,
			ref:    "registry.example.com/team/app" + digestRef,
			want:   &Auth{Username: "team", Password: "2", ServerAddress: "registry.example.com"},
		},
		{
			name:   "wildcard host",
			config: `{"auths":{"*.example.com":{"username":"u","password":"p"}}}`,
			ref:    "eu.example.com/apps/web" + digestRef,
			want:   &Auth{Username: "u", Password: "p", ServerAddress: "eu.example.com"},
		},
		{
			name:   "other registry is anonymous",
			config: `{"auths":{"quay.io":{"username":"u","password":"p"}}}`,
			ref:    "ghcr.io/org/app" + digestRef,
			want:   nil,
		},
		{name: "not json", config: `{`, ref: "quay.io/a" + digestRef, wantErr: "not valid JSON"},
		{name: "auth not base64", config: `{"auths":{"quay.io":{"auth":"%%%"}}}`, ref: "quay.io/a" + digestRef, wantErr: `auths["quay.io"]: unable to decode auth field`},
		{name: "auth without colon", config: `{"auths":{"quay.io":{"auth":"` + b64("userpass") + `"}}}`, ref: "quay.io/a" + digestRef, wantErr: `auths["quay.io"]: unable to decode auth field`},
		{name: "empty entry", config: `{"auths":{"quay.io":{}}}`, ref: "quay.io/a" + digestRef, wantErr: "has no credentials"},
		{name: "bad ref", config: `{}`, ref: "Not A Ref", wantErr: "credentials for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AuthFor([]byte(tc.config), tc.ref)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "pa:ss") || strings.Contains(err.Error(), `"p"`) {
					t.Errorf("error echoes a credential: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AuthFor (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAuthForSecretTypes: both pull-secret formats the kubelet reads give
// the same credentials, and each is read from its own key.
func TestAuthForSecretTypes(t *testing.T) {
	entry := `{"registry.example.com/team":{"username":"u","password":"p"}}`
	ref := "registry.example.com/team/app:v1"
	want := &Auth{Username: "u", Password: "p", ServerAddress: "registry.example.com"}
	for _, sec := range []corev1.Secret{
		{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":` + entry + `}`)}},
		{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(entry)}},
	} {
		got, err := AuthForSecret(sec, ref)
		if err != nil {
			t.Fatalf("%s: %v", sec.Type, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", sec.Type, diff)
		}
	}
	// The wrong key for the type holds nothing the kubelet reads.
	got, err := AuthForSecret(corev1.Secret{Type: corev1.SecretTypeDockercfg,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":` + entry + `}`)}}, ref)
	if err == nil && got != nil {
		t.Errorf("dockercfg secret read .dockerconfigjson: %v", got)
	}
	if _, err := AuthForSecret(corev1.Secret{Type: corev1.SecretTypeOpaque}, ref); err == nil {
		t.Error("Opaque secret: no error")
	}
}

func TestAuthStringHidesSecrets(t *testing.T) {
	a := &Auth{Username: "u", Password: "secret", Auth: "c2VjcmV0", IdentityToken: "tok", ServerAddress: "quay.io"}
	if s := a.String(); strings.Contains(s, "secret") || strings.Contains(s, "tok") || strings.Contains(s, "c2Vj") {
		t.Errorf("String() = %q shows a secret", s)
	}
	if s := (*Auth)(nil).String(); s != "anonymous" {
		t.Errorf("nil String() = %q", s)
	}
}
