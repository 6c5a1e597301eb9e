package cri

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/internal/pullsecret"
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

// AuthFor returns the credentials for ref from the .dockerconfigjson key
// of a kubernetes.io/dockerconfigjson Secret; see AuthForSecret.
func AuthFor(dockerConfigJSON []byte, ref string) (*Auth, error) {
	return AuthForSecret(corev1.Secret{
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON},
	}, ref)
}

// AuthForSecret returns the credentials for ref from a pull secret of
// type kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg, matched
// as the kubelet matches a pod's imagePullSecrets (see
// pullsecret.Keychain for the rules). A ref no key matches returns nil:
// pull anonymously, as the kubelet does. An entry that matches but
// carries no credentials is an error. Errors name the key at fault but
// never echo credentials.
func AuthForSecret(secret corev1.Secret, ref string) (*Auth, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("credentials for %q: %w", ref, err)
	}
	kc, err := pullsecret.Keychain(secret)
	if err != nil {
		return nil, err
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
