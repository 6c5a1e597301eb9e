package cri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/authn/kubernetes"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
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

// dockerHubAliases are the spellings of Docker Hub found in pull-secret
// keys. The kubelet matches a "docker.io" key against an image spelled
// "docker.io/..." as written in the pod; bootroll only sees references
// that go-containerregistry has normalised to index.docker.io, so every
// alias is rewritten to that host (path kept) before matching.
var dockerHubAliases = map[string]bool{
	"docker.io":               true,
	"index.docker.io":         true,
	"registry-1.docker.io":    true,
	"registry.hub.docker.com": true,
}

// AuthFor returns the credentials for ref from the .dockerconfigjson key
// of a kubernetes.io/dockerconfigjson Secret; see AuthForSecret.
func AuthFor(dockerConfigJSON []byte, ref string) (*Auth, error) {
	return AuthForSecret(corev1.Secret{
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON},
	}, ref)
}

// AuthForSecret returns the credentials for ref from a pull secret of
// type kubernetes.io/dockerconfigjson ({"auths": {KEY: ENTRY}}) or
// kubernetes.io/dockercfg ({KEY: ENTRY}), matched as the kubelet matches
// a pod's imagePullSecrets (go-containerregistry's authn/kubernetes
// keychain, a copy of the kubelet's keyring):
//
//   - a KEY is a host[:port] with an optional path, with or without a
//     scheme; "/v1/" and "/v2/" alone mean the bare host;
//   - it matches a ref whose registry has the same port and the same
//     number of dot-separated parts, each matching as a glob
//     ("*.example.com"), and whose host/repository path starts with the
//     KEY's path;
//   - among matching KEYs the longest (reverse sorted) wins, so
//     "registry.example.com/team" beats "registry.example.com".
//
// Hosts are compared as written (the kubelet does not fold case), except
// that Docker Hub's aliases all mean index.docker.io. An ENTRY carries
// "username" and "password", or "auth" (base64 of "user:password", split
// into Username and Password), or an "identitytoken" or "registrytoken".
// A ref no KEY matches returns nil: pull anonymously, as the kubelet does.
// Errors name the KEY at fault but never echo credentials.
func AuthForSecret(secret corev1.Secret, ref string) (*Auth, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("credentials for %q: %w", ref, err)
	}
	entries, err := pullSecretEntries(secret)
	if err != nil {
		return nil, err
	}
	// One secret per entry, in sorted key order: when two keys reduce to
	// the same registry ("quay.io" and "https://quay.io/v1/") the keychain
	// takes the first secret's, so the choice never depends on map order.
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	secrets := make([]corev1.Secret, 0, len(keys))
	for _, k := range keys {
		var cfg authn.AuthConfig
		if err := json.Unmarshal(entries[k], &cfg); err != nil {
			return nil, fmt.Errorf("parse pull secret: auths[%q]: %w", k, redact(err))
		}
		doc, err := json.Marshal(map[string]map[string]json.RawMessage{"auths": {foldDockerHub(k): entries[k]}})
		if err != nil {
			return nil, fmt.Errorf("parse pull secret: auths[%q]: %w", k, err)
		}
		secrets = append(secrets, corev1.Secret{
			Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: doc},
		})
	}
	// NewFromPullSecrets reads no context: it only builds the keyring.
	kc, err := kubernetes.NewFromPullSecrets(context.Background(), secrets)
	if err != nil {
		return nil, fmt.Errorf("parse pull secret: %w", err)
	}
	repo := r.Context()
	authr, err := kc.Resolve(repo)
	if err != nil {
		return nil, fmt.Errorf("credentials for %q: %w", ref, err)
	}
	if authr == authn.Anonymous {
		return nil, nil
	}
	cfg, err := authr.Authorization()
	if err != nil {
		return nil, fmt.Errorf("credentials for %q: %w", ref, err)
	}
	a := &Auth{Username: cfg.Username, Password: cfg.Password, Auth: cfg.Auth,
		IdentityToken: cfg.IdentityToken, RegistryToken: cfg.RegistryToken,
		ServerAddress: repo.RegistryStr()}
	if a.Username == "" && a.Password == "" && a.Auth == "" && a.IdentityToken == "" && a.RegistryToken == "" {
		return nil, fmt.Errorf("parse pull secret: the entry for %s has no credentials", repo)
	}
	return a, nil
}

// pullSecretEntries returns the raw entries of a pull secret by key.
func pullSecretEntries(secret corev1.Secret) (map[string]json.RawMessage, error) {
	switch secret.Type {
	case corev1.SecretTypeDockercfg:
		var auths map[string]json.RawMessage
		if err := json.Unmarshal(secret.Data[corev1.DockerConfigKey], &auths); err != nil {
			return nil, fmt.Errorf("parse pull secret: .dockercfg is not a JSON object: %w", redact(err))
		}
		return auths, nil
	case corev1.SecretTypeDockerConfigJson, "":
		var doc struct {
			Auths map[string]json.RawMessage `json:"auths"`
		}
		if err := json.Unmarshal(secret.Data[corev1.DockerConfigJsonKey], &doc); err != nil {
			return nil, fmt.Errorf("parse pull secret: .dockerconfigjson is not valid JSON: %w", redact(err))
		}
		return doc.Auths, nil
	default:
		return nil, fmt.Errorf("parse pull secret: type %q is not %s or %s",
			secret.Type, corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg)
	}
}

// foldDockerHub rewrites a key naming a Docker Hub alias to
// index.docker.io, keeping its path; other keys are returned unchanged.
func foldDockerHub(key string) string {
	rest := key
	scheme := ""
	for _, p := range []string{"https://", "http://"} {
		if strings.HasPrefix(strings.ToLower(rest), p) {
			scheme, rest = rest[:len(p)], rest[len(p):]
		}
	}
	host, path, _ := strings.Cut(rest, "/")
	if !dockerHubAliases[strings.ToLower(host)] {
		return key
	}
	if path != "" {
		path = "/" + path
	}
	return scheme + name.DefaultRegistry + path
}

// redact drops a JSON syntax error's text, which can quote the document.
func redact(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("syntax error at byte %d", syn.Offset)
	}
	return err
}
