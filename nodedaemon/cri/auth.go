package cri

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Auth is the registry credentials of one pull, as the CRI AuthConfig
// carries them. Either Username and Password, or Auth (base64 of
// "user:password"), or a token is set.
type Auth struct {
	Username      string
	Password      string
	Auth          string
	IdentityToken string
	RegistryToken string
	// ServerAddress is the registry host the credentials are for; it
	// names them in logs and is not sent to the runtime (see
	// Client.PullImage).
	ServerAddress string
}

// String names the user and registry but never the secrets, so an Auth
// can be logged.
func (a *Auth) String() string {
	if a == nil {
		return "anonymous"
	}
	user := a.Username
	if user == "" && a.Auth != "" {
		user = "(from auth)"
	}
	if user == "" && (a.IdentityToken != "" || a.RegistryToken != "") {
		user = "(token)"
	}
	return fmt.Sprintf("%s@%s", user, a.ServerAddress)
}

// dockerHub is how go-containerregistry names Docker Hub's registry.
const dockerHub = name.DefaultRegistry

// dockerHubAliases are the spellings of Docker Hub found in pull secrets.
var dockerHubAliases = map[string]bool{
	"docker.io":               true,
	"index.docker.io":         true,
	"registry-1.docker.io":    true,
	"registry.hub.docker.com": true,
}

// AuthFor returns the credentials for ref's registry from the
// .dockerconfigjson key of a kubernetes.io/dockerconfigjson Secret:
//
//	{"auths": {"registry.example.com": {"username": "u", "password": "p"}}}
//
// An entry may instead carry "auth" (base64 of "user:password"), which is
// also split into Username and Password, or an "identitytoken" or
// "registrytoken". Keys may be bare hosts ("host:port") or URLs
// ("https://host/v1/"); matching is by registry host, as the controller's
// tag resolver does, with Docker Hub's aliases folded together. When two
// keys name the same host the first in sorted order wins. A registry with
// no entry returns nil: pull anonymously. Errors name the key at fault but
// never echo credentials.
func AuthFor(dockerConfigJSON []byte, ref string) (*Auth, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("credentials for %q: %w", ref, err)
	}
	host := normaliseHost(r.Context().RegistryStr())
	var doc struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(dockerConfigJSON, &doc); err != nil {
		return nil, fmt.Errorf("parse pull secret: .dockerconfigjson is not valid JSON: %w", err)
	}
	keys := make([]string, 0, len(doc.Auths))
	for k := range doc.Auths {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if normaliseHost(k) != host {
			continue
		}
		var e struct {
			Username      string `json:"username"`
			Password      string `json:"password"`
			Auth          string `json:"auth"`
			IdentityToken string `json:"identitytoken"`
			RegistryToken string `json:"registrytoken"`
		}
		if err := json.Unmarshal(doc.Auths[k], &e); err != nil {
			return nil, fmt.Errorf("parse pull secret: auths[%q] is not an object of strings", k)
		}
		a := &Auth{Username: e.Username, Password: e.Password, Auth: e.Auth,
			IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken, ServerAddress: host}
		if a.Auth != "" && a.Username == "" && a.Password == "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("parse pull secret: auths[%q].auth is not base64", k)
			}
			user, pass, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("parse pull secret: auths[%q].auth is not base64 of user:password", k)
			}
			a.Username, a.Password = user, pass
		}
		if a.Username == "" && a.Password == "" && a.Auth == "" && a.IdentityToken == "" && a.RegistryToken == "" {
			return nil, fmt.Errorf("parse pull secret: auths[%q] has no credentials", k)
		}
		return a, nil
	}
	return nil, nil
}

// normaliseHost reduces a pull-secret key or registry name to a lower-case
// host[:port], folding every Docker Hub alias into index.docker.io.
func normaliseHost(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "https://")
	s = strings.TrimPrefix(s, "http://")
	s, _, _ = strings.Cut(s, "/")
	if dockerHubAliases[s] {
		return dockerHub
	}
	return s
}
