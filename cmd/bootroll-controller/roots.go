package main

// The controller resolves pool image tags against registries (controller/resolve) over TLS, and its image (hack/images) is a single layer
// with only the binary: no /etc/ssl/certs. The fallback package embeds
// Mozilla's root CAs and registers them with crypto/x509.SetFallbackRoots,
// which Go uses only when the system has no roots of its own: a CA bundle
// mounted at /etc/ssl/certs, or named by SSL_CERT_FILE / SSL_CERT_DIR,
// still wins (README "Private registries").
import _ "golang.org/x/crypto/x509roots/fallback"
