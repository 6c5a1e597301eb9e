// Package pullsecret reads Kubernetes image pull secrets the way the
// kubelet reads a pod's imagePullSecrets. It is the one parser of pull
// secrets: the controller resolves pool tags with it and the daemon picks
// the credentials of each CRI pull with it.
package pullsecret

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

// Keychain returns the credentials of a pull secret of type
// kubernetes.io/dockerconfigjson ({"auths": {KEY: ENTRY}}, in the
// .dockerconfigjson key; an empty type is read as this one) or
// kubernetes.io/dockercfg ({KEY: ENTRY}, in the .dockercfg key), matched
// as the kubelet matches them (go-containerregistry's authn/kubernetes
// keychain, a copy of the kubelet's keyring):
//
//   - a KEY is a host[:port] with an optional path, with or without a
//     scheme; "/v1/" and "/v2/" alone mean the bare host;
//   - it matches a repository whose registry has the same port and the
//     same number of dot-separated parts, each matching as a glob
//     ("*.example.com"), and whose host/repository path starts with the
//     KEY's path;
//   - among matching KEYs the longest (reverse sorted) wins, so
//     "registry.example.com/team" beats "registry.example.com".
//
// Hosts are compared as written (the kubelet does not fold case), except
// that Docker Hub's aliases all mean index.docker.io. An ENTRY carries
// "username" and "password", or "auth" (base64 of "user:password"), or an
// "identitytoken" or "registrytoken". A repository no KEY matches resolves
// to authn.Anonymous, as the kubelet pulls it.
//
// The keychain only builds a keyring: it reads no context and makes no
// request. Errors start "parse pull secret: ", name the KEY at fault and
// never echo credentials.
func Keychain(secret corev1.Secret) (authn.Keychain, error) {
	entries, err := entries(secret)
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
	return kc, nil
}

// entries returns the raw entries of a pull secret by key.
func entries(secret corev1.Secret) (map[string]json.RawMessage, error) {
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
