package resolve

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// dockerHubAliases are the spellings of Docker Hub found in pull secrets;
// all of them match refs on name.DefaultRegistry ("index.docker.io").
var dockerHubAliases = map[string]bool{
	"docker.io":               true,
	"index.docker.io":         true,
	"registry-1.docker.io":    true,
	"registry.hub.docker.com": true,
}

// pullSecret is an authn.Keychain built from a dockerconfigjson document,
// keyed by normalised registry host (host[:port], lower case).
type pullSecret map[string]authn.AuthConfig

var _ authn.Keychain = pullSecret(nil)

// parsePullSecret parses the .dockerconfigjson key of a
// kubernetes.io/dockerconfigjson Secret:
//
//	{"auths": {"registry.example.com": {"auth": "base64(user:pass)"}}}
//
// Each entry may instead carry "username" and "password", or an
// "identitytoken" / "registrytoken". Keys may be bare hosts ("host:port") or
// URLs ("https://host/v1/"); only the host is kept, so matching is by
// registry host, never by repository path. When two keys name the same
// host, the first in sorted key order wins, so the result never depends on
// map order. Errors name the offending key but never echo credentials.
func parsePullSecret(data []byte) (pullSecret, error) {
	var doc struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse pull secret: .dockerconfigjson is not valid JSON: %w", err)
	}
	keys := make([]string, 0, len(doc.Auths))
	for k := range doc.Auths {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	ps := pullSecret{}
	for _, k := range keys {
		var cfg authn.AuthConfig
		if err := json.Unmarshal(doc.Auths[k], &cfg); err != nil {
			return nil, fmt.Errorf("parse pull secret: auths[%q]: %w", k, err)
		}
		host := normaliseHost(k)
		if host == "" {
			return nil, fmt.Errorf("parse pull secret: auths[%q]: key names no registry host", k)
		}
		if _, seen := ps[host]; seen {
			continue
		}
		ps[host] = cfg
	}
	return ps, nil
}

// Resolve implements authn.Keychain. A registry with no entry is accessed
// anonymously, as the kubelet does.
func (ps pullSecret) Resolve(target authn.Resource) (authn.Authenticator, error) {
	cfg, ok := ps[normaliseHost(target.RegistryStr())]
	if !ok {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(cfg), nil
}

// normaliseHost reduces a pull-secret key or registry name to a lower-case
// host[:port], folding every Docker Hub alias into "index.docker.io".
func normaliseHost(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "https://")
	s = strings.TrimPrefix(s, "http://")
	s, _, _ = strings.Cut(s, "/")
	s = strings.TrimSpace(s)
	if dockerHubAliases[s] {
		return dockerHub
	}
	return s
}
