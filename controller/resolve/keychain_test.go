package resolve

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestPullSecretResolve(t *testing.T) {
	tests := []struct {
		name     string
		secret   string
		registry string // as go-containerregistry names it
		wantUser string // "" means anonymous
		wantPass string
	}{
		{name: "bare host", secret: `{"auths":{"reg.example.com":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: "reg.example.com", wantUser: "alice", wantPass: "s3cret"},
		{name: "host with port", secret: `{"auths":{"reg.example.com:5000":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: "reg.example.com:5000", wantUser: "alice", wantPass: "s3cret"},
		{name: "port must match", secret: `{"auths":{"reg.example.com:5000":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: "reg.example.com"},
		{name: "https URL key", secret: `{"auths":{"https://reg.example.com/v2/":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: "reg.example.com", wantUser: "alice", wantPass: "s3cret"},
		{name: "upper case key", secret: `{"auths":{"REG.Example.com":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: "reg.example.com", wantUser: "alice", wantPass: "s3cret"},
		{name: "unpadded auth", secret: `{"auths":{"reg.example.com":{"auth":"YWxpY2U6cw"}}}`, registry: "reg.example.com", wantUser: "alice", wantPass: "s"},
		{name: "password with colon", secret: `{"auths":{"reg.example.com":{"auth":"YWxpY2U6YTpi"}}}`, registry: "reg.example.com", wantUser: "alice", wantPass: "a:b"},
		{name: "username and password", secret: `{"auths":{"reg.example.com":{"username":"bob","password":"pw"}}}`, registry: "reg.example.com", wantUser: "bob", wantPass: "pw"},
		{name: "other host is anonymous", secret: `{"auths":{"reg.example.com":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: "quay.io"},
		{name: "empty auths", secret: `{"auths":{}}`, registry: "quay.io"},
		{name: "no auths", secret: `{}`, registry: "quay.io"},
		{name: "docker hub legacy URL", secret: `{"auths":{"https://index.docker.io/v1/":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: name.DefaultRegistry, wantUser: "alice", wantPass: "s3cret"},
		{name: "docker hub docker.io", secret: `{"auths":{"docker.io":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: name.DefaultRegistry, wantUser: "alice", wantPass: "s3cret"},
		{name: "docker hub registry-1", secret: `{"auths":{"registry-1.docker.io":{"auth":"YWxpY2U6czNjcmV0"}}}`, registry: name.DefaultRegistry, wantUser: "alice", wantPass: "s3cret"},
		// "docker.io" sorts before "https://index.docker.io/v1/", so it wins.
		{name: "duplicate hosts: first sorted key wins",
			secret:   `{"auths":{"https://index.docker.io/v1/":{"username":"late","password":"x"},"docker.io":{"username":"early","password":"y"}}}`,
			registry: name.DefaultRegistry, wantUser: "early", wantPass: "y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := parsePullSecret([]byte(tt.secret))
			if err != nil {
				t.Fatalf("parsePullSecret: %v", err)
			}
			reg, err := name.NewRegistry(tt.registry)
			if err != nil {
				t.Fatal(err)
			}
			auth, err := ps.Resolve(reg)
			if err != nil {
				t.Fatalf("Resolve(%s): %v", tt.registry, err)
			}
			if tt.wantUser == "" {
				if auth != authn.Anonymous {
					t.Errorf("Resolve(%s) = %v, want anonymous", tt.registry, auth)
				}
				return
			}
			cfg, err := authn.Authorization(context.Background(), auth)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Username != tt.wantUser || cfg.Password != tt.wantPass {
				t.Errorf("Resolve(%s) = %q/%q, want %q/%q", tt.registry, cfg.Username, cfg.Password, tt.wantUser, tt.wantPass)
			}
		})
	}
}

func TestParsePullSecretErrors(t *testing.T) {
	tests := []struct {
		name    string
		secret  string
		wantErr string
	}{
		{name: "not JSON", secret: `{`, wantErr: "not valid JSON"},
		{name: "auths not an object", secret: `{"auths":[]}`, wantErr: "not valid JSON"},
		{name: "entry not an object", secret: `{"auths":{"reg.example.com":"s3cret"}}`, wantErr: `auths["reg.example.com"]`},
		{name: "auth not base64", secret: `{"auths":{"reg.example.com":{"auth":"!!s3cret!!"}}}`, wantErr: `auths["reg.example.com"]`},
		{name: "auth without colon", secret: `{"auths":{"reg.example.com":{"auth":"czNjcmV0"}}}`, wantErr: "username:password"},
		{name: "empty key", secret: `{"auths":{"":{"auth":"YWxpY2U6czNjcmV0"}}}`, wantErr: "no registry host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePullSecret([]byte(tt.secret))
			if err == nil {
				t.Fatalf("parsePullSecret(%s) succeeded, want an error containing %q", tt.secret, tt.wantErr)
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

func FuzzParsePullSecret(f *testing.F) {
	f.Add([]byte(`{"auths":{"reg.example.com":{"auth":"YWxpY2U6czNjcmV0"}}}`))
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"username":"a","password":"b"}}}`))
	f.Add([]byte(`{"auths":{"":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := parsePullSecret(data)
		if err != nil {
			return
		}
		for host := range ps {
			if host == "" || host != normaliseHost(host) {
				t.Errorf("stored host %q is not normalised", host)
			}
		}
	})
}
