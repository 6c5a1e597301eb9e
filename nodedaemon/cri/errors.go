package cri

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Kind classifies a CRI image-service error by what the daemon should do
// about it. Its values are CamelCase so they serve as a status Reason as
// they are.
type Kind string

// The error kinds. Classify documents which real messages map to which.
const (
	// KindNotFound: the registry has no such manifest, or a layer blob is
	// missing. Retrying does not help until someone pushes it.
	KindNotFound Kind = "NotFound"
	// KindOutOfSpace: the image filesystem filled up (ENOSPC, or a quota).
	KindOutOfSpace Kind = "OutOfSpace"
	// KindRegistryUnreachable: no usable answer from the registry:
	// connection refused, DNS failure, timeout, a connection cut mid-pull,
	// or a gateway error from a proxy in front of it. Transient.
	KindRegistryUnreachable Kind = "RegistryUnreachable"
	// KindRuntimeUnavailable: containerd (the CRI endpoint) does not
	// answer: not running, or stopped mid-call. Transient.
	KindRuntimeUnavailable Kind = "RuntimeUnavailable"
	// KindDeadline: the call's deadline passed (containerd cancels the pull
	// too). Transient.
	KindDeadline Kind = "DeadlineExceeded"
	// KindCanceled: the caller canceled the call.
	KindCanceled Kind = "Canceled"
	// KindAuth: the registry refused the credentials or their absence.
	KindAuth Kind = "Unauthorized"
	// KindInvalidReference: the runtime cannot parse the reference.
	KindInvalidReference Kind = "InvalidReference"
	// KindUnknown: anything else.
	KindUnknown Kind = "Unknown"
)

// Transient reports whether an error of kind k may go away by itself, so
// that the call is worth retrying after a backoff.
func (k Kind) Transient() bool {
	switch k {
	case KindRegistryUnreachable, KindRuntimeUnavailable, KindDeadline, KindUnknown:
		return true
	}
	return false
}

// Message fragments of real containerd 1.6 CRI errors (see
// shared/reference/cri-errors.md and containerd_test.go, which checks them
// against a running containerd). They are matched on lower-cased text.
var (
	// outOfSpace: ENOSPC while downloading into the content store, while
	// unpacking a layer, or while writing the metadata database; EDQUOT
	// behaves the same.
	outOfSpace = []string{"no space left on device", "disk quota exceeded"}
	// invalidReference: the CRI plugin's reference parser.
	invalidReference = []string{"invalid reference format", "failed to parse image reference"}
	// auth: containerd's resolver on 401/403 from the registry or its
	// token server.
	auth = []string{
		"401 unauthorized", "403 forbidden", "unexpected status: 401", "unexpected status: 403",
		"failed to fetch anonymous token", "failed to fetch oauth token", "failed to authorize",
		"authorization failed", "no basic auth credentials", "pull access denied", "insufficient_scope",
	}
	// notFound: a manifest or blob the registry does not have, when the
	// code is not NotFound already.
	notFound = []string{": not found", "manifest unknown", "blob unknown", "name unknown"}
	// registryUnreachable: the resolver's or fetcher's transport errors,
	// and 5xx from the registry or a proxy.
	registryUnreachable = []string{
		"failed to do request", "connection refused", "connection reset by peer", "no such host",
		"i/o timeout", "tls handshake timeout", "network is unreachable", "no route to host",
		"unexpected eof", "failed to read expected number of bytes", "server misbehaving",
		"500 internal server error", "502 bad gateway", "503 service unavailable", "504 gateway timeout",
		"unexpected status: 5", "http: server gave http response to https client", "x509:", "tls:",
	}
)

// Classify tells what kind of error err is. It looks at the gRPC code
// first, then at the message, because containerd 1.6 returns most pull
// failures as code Unknown with the cause only in the text:
//
//	NotFound          failed to pull and unpack image "<ref>": failed to resolve reference "<ref>": <ref>: not found
//	                  ...: failed to copy: httpReadSeeker: failed open: could not fetch content descriptor sha256:... from remote: not found
//	Unknown           failed to parse image reference "...": invalid reference format        → InvalidReference
//	Unknown           ...: failed to do request: Head "http://...": dial tcp ...: connect: connection refused → RegistryUnreachable
//	Unknown           ...: failed to read expected number of bytes: unexpected EOF            → RegistryUnreachable
//	Unknown           ...: write .../content/ingest/<id>/data: no space left on device      → OutOfSpace
//	Unknown           ...: failed to extract layer sha256:...: ... no space left on device: unknown → OutOfSpace
//	Unknown           ...: failed to prepare extraction snapshot "...": write .../meta.db: no space left on device → OutOfSpace
//	Unknown           ...: pulling from host ... failed with status code [manifests ...]: 401 Unauthorized → Auth
//	DeadlineExceeded  context deadline exceeded                                             → Deadline
//	Unavailable       error reading from server: EOF (containerd stopped mid-pull)          → RuntimeUnavailable
//	Unavailable       connection error: ... dial unix ...: connect: no such file or directory → RuntimeUnavailable
//
// Out of space wins over every other kind: a disk-full message can come
// with any code. nil is "".
func Classify(err error) Kind {
	if err == nil {
		return ""
	}
	msg := strings.ToLower(err.Error())
	if containsAny(msg, outOfSpace) {
		return KindOutOfSpace
	}
	var unavailable *unavailableError
	if errors.As(err, &unavailable) {
		return KindRuntimeUnavailable
	}
	var none *NoRuntimeError
	if errors.As(err, &none) {
		return KindRuntimeUnavailable
	}
	st, isStatus := status.FromError(err)
	if isStatus {
		msg = strings.ToLower(st.Message())
	}
	code := st.Code()
	switch {
	case !isStatus && errors.Is(err, context.DeadlineExceeded):
		return KindDeadline
	case !isStatus && errors.Is(err, context.Canceled):
		return KindCanceled
	case !isStatus:
		code = codes.Unknown
	}
	switch code {
	case codes.NotFound:
		return KindNotFound
	case codes.DeadlineExceeded:
		return KindDeadline
	case codes.Canceled:
		return KindCanceled
	case codes.Unavailable:
		return KindRuntimeUnavailable
	case codes.Unauthenticated, codes.PermissionDenied:
		return KindAuth
	case codes.ResourceExhausted:
		// gRPC uses it for oversized messages, not for disk space.
		return KindUnknown
	case codes.InvalidArgument:
		if containsAny(msg, invalidReference) {
			return KindInvalidReference
		}
	}
	switch {
	case containsAny(msg, invalidReference):
		return KindInvalidReference
	case containsAny(msg, auth):
		return KindAuth
	case containsAny(msg, registryUnreachable):
		return KindRegistryUnreachable
	case containsAny(msg, notFound):
		return KindNotFound
	case strings.Contains(msg, "context deadline exceeded"):
		return KindDeadline
	case strings.Contains(msg, "context canceled"):
		return KindCanceled
	}
	return KindUnknown
}

func containsAny(s string, parts []string) bool {
	for _, p := range parts {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// Message is the runtime's own message in err: without the gRPC framing
// ("rpc error: code = ... desc = ") and without what the client wrapped
// around it. For an error that is not from the runtime it is err's text.
func Message(err error) string {
	if err == nil {
		return ""
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		if s := gs.GRPCStatus(); s != nil {
			return s.Message()
		}
	}
	return err.Error()
}
