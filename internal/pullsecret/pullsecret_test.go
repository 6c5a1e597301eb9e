package pullsecret

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// dockerConfigJSON is a kubernetes.io/dockerconfigjson secret holding doc.
func dockerConfigJSON(doc string) corev1.Secret {
	return corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(doc)}}
}

// dockercfg is a kubernetes.io/dockercfg secret holding doc.
func dockercfg(doc string) corev1.Secret {
	return corev1.Secret{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: []byte(doc)}}
}

// resolve returns what kc gives the repository of ref: nil for anonymous.
func resolve(t *testing.T, kc authn.Keychain, ref string) *authn.AuthConfig {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	a, err := kc.Resolve(r.Context())
	if err != nil {
		t.Fatalf("Resolve(%s): %v", ref, err)
	}
	if a == authn.Anonymous {
		return nil
	}
	cfg, err := authn.Authorization(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestKeychain: the kubelet's matching rules, and the two bootroll adds in
// front of them (Docker Hub aliases folded, sorted keys).
func TestKeychain(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	up := func(u, p string) *authn.AuthConfig { return &authn.AuthConfig{Username: u, Password: p} }
	tests := []struct {
		name   string
		secret corev1.Secret
		ref    string
		want   *authn.AuthConfig // nil means anonymous
	}{
		{name: "bare host", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"auth":"` + b64("alice:s3cret") + `"}}}`),
			ref: "reg.example.com/app:v1", want: up("alice", "s3cret")},
		{name: "host with port", secret: dockerConfigJSON(`{"auths":{"reg.example.com:5000":{"username":"u","password":"p"}}}`),
			ref: "reg.example.com:5000/apps/web", want: up("u", "p")},
		{name: "port must match", secret: dockerConfigJSON(`{"auths":{"reg.example.com:5000":{"username":"u","password":"p"}}}`),
			ref: "reg.example.com/apps/web"},
		{name: "port matters the other way", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"username":"u","password":"p"}}}`),
			ref: "reg.example.com:5000/apps/web"},
		{name: "https URL key with /v2/", secret: dockerConfigJSON(`{"auths":{"https://reg.example.com/v2/":{"username":"u","password":"p"}}}`),
			ref: "reg.example.com/app", want: up("u", "p")},
		{name: "auth field is split", secret: dockerConfigJSON(`{"auths":{"https://reg.example.com/v1/":{"auth":"` + b64("user:pa:ss") + `"}}}`),
			ref: "reg.example.com/app", want: up("user", "pa:ss")},
		{name: "unpadded auth", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"auth":"YWxpY2U6cw"}}}`),
			ref: "reg.example.com/app", want: up("alice", "s")},
		{name: "identity token", secret: dockerConfigJSON(`{"auths":{"quay.io":{"identitytoken":"tok"}}}`),
			ref: "quay.io/org/app", want: &authn.AuthConfig{IdentityToken: "tok"}},
		// The kubelet does not fold case; neither do we.
		{name: "case is not folded", secret: dockerConfigJSON(`{"auths":{"REG.Example.com":{"username":"u","password":"p"}}}`),
			ref: "reg.example.com/app"},
		{name: "other host is anonymous", secret: dockerConfigJSON(`{"auths":{"quay.io":{"username":"u","password":"p"}}}`),
			ref: "ghcr.io/org/app"},
		{name: "empty auths", secret: dockerConfigJSON(`{"auths":{}}`), ref: "quay.io/app"},
		{name: "no auths", secret: dockerConfigJSON(`{}`), ref: "quay.io/app"},
		{name: "empty key matches nothing", secret: dockerConfigJSON(`{"auths":{"":{"username":"u","password":"p"}}}`), ref: "quay.io/app"},

		{name: "longest path prefix wins", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"username":"all","password":"1"},"reg.example.com/team":{"username":"team","password":"2"}}}`),
			ref: "reg.example.com/team/app", want: up("team", "2")},
		{name: "path prefix falls back to the host", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"username":"all","password":"1"},"reg.example.com/team":{"username":"team","password":"2"}}}`),
			ref: "reg.example.com/other/app", want: up("all", "1")},
		{name: "path prefix alone does not match another path", secret: dockerConfigJSON(`{"auths":{"reg.example.com/team":{"username":"u","password":"p"}}}`),
			ref: "reg.example.com/other/app"},
		{name: "wildcard host", secret: dockerConfigJSON(`{"auths":{"*.example.com":{"username":"u","password":"p"}}}`),
			ref: "eu.example.com/apps/web", want: up("u", "p")},
		{name: "wildcard matches one label only", secret: dockerConfigJSON(`{"auths":{"*.example.com":{"username":"u","password":"p"}}}`),
			ref: "a.eu.example.com/apps/web"},

		{name: "docker hub v1 URL matches an implicit registry", secret: dockerConfigJSON(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`),
			ref: "library/busybox", want: up("u", "p")},
		{name: "docker hub docker.io", secret: dockerConfigJSON(`{"auths":{"docker.io":{"username":"u","password":"p"}}}`),
			ref: "docker.io/library/busybox", want: up("u", "p")},
		{name: "docker hub registry-1", secret: dockerConfigJSON(`{"auths":{"registry-1.docker.io":{"username":"u","password":"p"}}}`),
			ref: "busybox", want: up("u", "p")},
		{name: "docker hub alias with a path", secret: dockerConfigJSON(`{"auths":{"https://registry-1.docker.io/team":{"username":"u","password":"p"}}}`),
			ref: "team/app", want: up("u", "p")},
		{name: "docker hub path prefix excludes other users", secret: dockerConfigJSON(`{"auths":{"docker.io/team":{"username":"u","password":"p"}}}`),
			ref: "busybox"},

		// "docker.io" sorts before "https://index.docker.io/v1/", so it wins.
		{name: "same registry twice: first sorted key wins (docker hub)",
			secret: dockerConfigJSON(`{"auths":{"https://index.docker.io/v1/":{"username":"late","password":"x"},"docker.io":{"username":"early","password":"y"}}}`),
			ref:    "busybox", want: up("early", "y")},
		{name: "same registry twice: first sorted key wins",
			secret: dockerConfigJSON(`{"auths":{"quay.io":{"username":"a","password":"1"},"https://quay.io":{"username":"b","password":"2"}}}`),
			ref:    "quay.io/org/app", want: up("b", "2")},

		{name: "dockercfg", secret: dockercfg(`{"reg.example.com/team":{"username":"u","password":"p"}}`),
			ref: "reg.example.com/team/app", want: up("u", "p")},
		{name: "dockercfg docker hub alias", secret: dockercfg(`{"https://index.docker.io/v1/":{"auth":"` + b64("u:p") + `"}}`),
			ref: "busybox", want: up("u", "p")},
		{name: "empty type reads .dockerconfigjson", secret: corev1.Secret{Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"username":"u","password":"p"}}}`)}},
			ref: "quay.io/app", want: up("u", "p")},
		// The wrong key for the type holds nothing the kubelet reads.
		{name: "dockercfg type ignores .dockerconfigjson", secret: corev1.Secret{Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{}`), corev1.DockerConfigJsonKey: []byte(`{"auths":{"quay.io":{"username":"u","password":"p"}}}`)}},
			ref: "quay.io/app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc, err := Keychain(tt.secret)
			if err != nil {
				t.Fatalf("Keychain: %v", err)
			}
			got := resolve(t, kc, tt.ref)
			if got != nil {
				got.Auth = "" // the keychain drops it once split; compare what is sent
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("credentials for %s (-want +got):\n%s", tt.ref, diff)
			}
		})
	}
}

func TestKeychainErrors(t *testing.T) {
	tests := []struct {
		name    string
		secret  corev1.Secret
		wantErr string
	}{
		{name: "not JSON", secret: dockerConfigJSON(`{"s3cret`), wantErr: "not valid JSON"},
		{name: "no data", secret: corev1.Secret{Type: corev1.SecretTypeDockerConfigJson}, wantErr: ".dockerconfigjson is not valid JSON"},
		{name: "auths not an object", secret: dockerConfigJSON(`{"auths":["s3cret"]}`), wantErr: "not valid JSON"},
		{name: "entry not an object", secret: dockerConfigJSON(`{"auths":{"reg.example.com":"s3cret"}}`), wantErr: `auths["reg.example.com"]`},
		{name: "auth not base64", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"auth":"!!s3cret!!"}}}`), wantErr: `auths["reg.example.com"]: unable to decode auth field`},
		{name: "auth without colon", secret: dockerConfigJSON(`{"auths":{"reg.example.com":{"auth":"czNjcmV0"}}}`), wantErr: "username:password"},
		{name: "dockercfg not JSON", secret: dockercfg(`{"s3cret`), wantErr: ".dockercfg is not a JSON object"},
		{name: "opaque", secret: corev1.Secret{Type: corev1.SecretTypeOpaque}, wantErr: `type "Opaque" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Keychain(tt.secret)
			if err == nil {
				t.Fatalf("Keychain succeeded, want an error containing %q", tt.wantErr)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "parse pull secret: ") || !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error %q, want prefix %q and %q", msg, "parse pull secret: ", tt.wantErr)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("error %q leaks the secret", msg)
			}
		})
	}
}

// FuzzKeychain: any document either parses into a keychain that resolves
// any repository, or fails with an error that does not quote a password.
func FuzzKeychain(f *testing.F) {
	f.Add([]byte(`{"auths":{"reg.example.com":{"auth":"YWxpY2U6aHVudGVyMg=="}}}`))
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"username":"a","password":"hunter2"}}}`))
	f.Add([]byte(`{"auths":{"*.example.com/team":{"password":"hunter2"}}}`))
	f.Add([]byte(`{"auths":{"":{}}}`))
	repos := []string{"reg.example.com/app", "index.docker.io/library/busybox", "eu.example.com/team/app", "localhost:5000/a"}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sec := range []corev1.Secret{
			{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: data}},
			{Type: corev1.SecretTypeDockercfg, Data: map[string][]byte{corev1.DockerConfigKey: data}},
		} {
			kc, err := Keychain(sec)
			if err != nil {
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error quotes the password: %v", err)
				}
				continue
			}
			for _, r := range repos {
				repo, err := name.NewRepository(r)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := kc.Resolve(repo); err != nil {
					t.Errorf("Resolve(%s): %v", r, err)
				}
			}
		}
	})
}
