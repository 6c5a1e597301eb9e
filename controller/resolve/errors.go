package resolve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ErrorKind classifies resolution failures for pool conditions. Its values
// are CamelCase so they can be used as a condition Reason as they are.
type ErrorKind string

const (
	// KindInvalidReference: the ref does not parse as an image reference.
	KindInvalidReference ErrorKind = "InvalidReference"
	// KindNotFound: the registry answered and has no such repository or tag.
	KindNotFound ErrorKind = "NotFound"
	// KindUnauthorized: the registry refused the credentials (or their
	// absence), or the pull secret could not be parsed.
	KindUnauthorized ErrorKind = "Unauthorized"
	// KindUnreachable: no usable answer from the registry: connection
	// refused, DNS failure, timeout, TLS verification failure, or a gateway
	// error (502, 503, 504) from a proxy in front of it.
	KindUnreachable ErrorKind = "RegistryUnreachable"
	// KindUnknown: anything else.
	KindUnknown ErrorKind = "Unknown"
)

// Error is returned by Resolve; Kind says what went wrong, Err the cause.
type Error struct {
	Kind ErrorKind
	Ref  string
	Err  error
}

// Error names the ref and the kind, then the cause.
func (e *Error) Error() string {
	return fmt.Sprintf("resolve image %q: %s: %v", e.Ref, e.Kind, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of the first *Error in err's chain, KindUnknown for
// any other non-nil error, and "" for nil.
func KindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindUnknown
}

// classify maps an error from name or remote to an ErrorKind. Registry
// diagnostics are checked before the status code because some registries
// answer 400 or 200-with-error bodies that still carry a precise code.
func classify(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var bad *name.ErrBadName
	if errors.As(err, &bad) {
		return KindInvalidReference
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		return classifyTransport(terr)
	}
	if errors.Is(err, context.Canceled) {
		return KindUnknown
	}
	if isUnreachable(err) {
		return KindUnreachable
	}
	return KindUnknown
}

func classifyTransport(terr *transport.Error) ErrorKind {
	for _, d := range terr.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return KindNotFound
		case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
			return KindUnauthorized
		}
	}
	switch terr.StatusCode {
	case http.StatusNotFound:
		return KindNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return KindUnauthorized
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return KindUnreachable
	}
	return KindUnknown
}

// isUnreachable reports whether err means no usable connection to the
// registry was made or kept.
func isUnreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) {
		return true
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var netErr net.Error
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr x509.CertificateInvalidError
	var verifyErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr),
		errors.As(err, &unknownCA), errors.As(err, &hostErr),
		errors.As(err, &certErr), errors.As(err, &verifyErr):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	}
	return false
}
