package cri

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
			want:   &Auth{Username: "user", Password: "pa:ss", Auth: b64("user:pa:ss"), ServerAddress: "registry.example.com"},
		},
		{
			name:   "docker hub alias",
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
			name:   "host case and first sorted key",
			config: `{"auths":{"Quay.IO":{"username":"a","password":"1"},"https://quay.io":{"username":"b","password":"2"}}}`,
			ref:    "quay.io/org/app" + digestRef,
			want:   &Auth{Username: "a", Password: "1", ServerAddress: "quay.io"},
		},
		{
			name:   "other registry is anonymous",
			config: `{"auths":{"quay.io":{"username":"u","password":"p"}}}`,
			ref:    "ghcr.io/org/app" + digestRef,
			want:   nil,
		},
		{
			name:   "port matters",
			config: `{"auths":{"registry.example.com":{"username":"u","password":"p"}}}`,
			ref:    "registry.example.com:5000/apps/web" + digestRef,
			want:   nil,
		},
		{name: "not json", config: `{`, ref: "quay.io/a" + digestRef, wantErr: "not valid JSON"},
		{name: "auth not base64", config: `{"auths":{"quay.io":{"auth":"%%%"}}}`, ref: "quay.io/a" + digestRef, wantErr: `auths["quay.io"].auth is not base64`},
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

func TestAuthStringHidesSecrets(t *testing.T) {
	a := &Auth{Username: "u", Password: "secret", Auth: "c2VjcmV0", IdentityToken: "tok", ServerAddress: "quay.io"}
	if s := a.String(); strings.Contains(s, "secret") || strings.Contains(s, "tok") || strings.Contains(s, "c2Vj") {
		t.Errorf("String() = %q shows a secret", s)
	}
	if s := (*Auth)(nil).String(); s != "anonymous" {
		t.Errorf("nil String() = %q", s)
	}
}
