package cri

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	ref    = "127.0.0.1:5000/apps/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	layer  = "sha256:89abcdef0123456789abcdef0123456789abcdef0123456789abcdef01234567"
	prefix = `failed to pull and unpack image "` + ref + `": `
)

// The messages of shared/reference/cri-errors.md (containerd 1.6.20, CRI
// v1), with <ref> and the elided parts filled in as containerd writes them.
var realErrors = []struct {
	name string
	code codes.Code
	msg  string
	want Kind
}{
	{"digest not in registry", codes.NotFound,
		prefix + `failed to resolve reference "` + ref + `": ` + ref + `: not found`, KindNotFound},
	{"layer blob missing", codes.NotFound,
		prefix + `failed to copy: httpReadSeeker: failed open: could not fetch content descriptor ` + layer + ` (application/vnd.docker.image.rootfs.diff.tar.gzip) from remote: not found`, KindNotFound},
	{"malformed reference", codes.Unknown,
		`failed to parse image reference "127.0.0.1:5000/Apps/web:": invalid reference format`, KindInvalidReference},
	{"registry down", codes.Unknown,
		prefix + `failed to resolve reference "` + ref + `": failed to do request: Head "http://127.0.0.1:5000/v2/apps/web/manifests/sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": dial tcp 127.0.0.1:5000: connect: connection refused`, KindRegistryUnreachable},
	{"registry killed mid-pull", codes.Unknown,
		prefix + `failed to copy: failed to read expected number of bytes: unexpected EOF`, KindRegistryUnreachable},
	{"client deadline", codes.DeadlineExceeded, `context deadline exceeded`, KindDeadline},
	{"containerd stopped mid-pull", codes.Unavailable, `error reading from server: EOF`, KindRuntimeUnavailable},
	{"containerd not running", codes.Unavailable,
		`connection error: desc = "transport: Error while dialing: dial unix /tmp/ctrd123/containerd.sock: connect: no such file or directory"`, KindRuntimeUnavailable},
	{"disk full while downloading", codes.Unknown,
		prefix + `failed to copy: write /tmp/ctrd123/root/io.containerd.content.v1.content/ingest/4b0c2f6a/data: no space left on device`, KindOutOfSpace},
	{"disk full while unpacking", codes.Unknown,
		prefix + `failed to extract layer ` + layer + `: write /tmp/ctrd123/root/io.containerd.snapshotter.v1.overlayfs/snapshots/7/fs/blob: no space left on device: unknown`, KindOutOfSpace},
	{"disk full in metadata", codes.Unknown,
		prefix + `failed to prepare extraction snapshot "extract-123-abc ` + layer + `": write /tmp/ctrd123/root/io.containerd.metadata.v1.bolt/meta.db: no space left on device`, KindOutOfSpace},
}

// Messages TestContainerd* saw from containerd 1.6.20~ds1-1+deb12u3 on
// these machines, verbatim but for the registry port and temporary paths.
var observedErrors = []struct {
	name string
	code codes.Code
	msg  string
	want Kind
}{
	{"upper-case repository", codes.Unknown,
		`failed to parse image reference "127.0.0.1:38685/Apps/Upper@sha256:abc": invalid reference format: repository name must be lowercase`, KindInvalidReference},
	{"registry 401", codes.Unknown,
		`failed to pull and unpack image "127.0.0.1:39535/apps/private@sha256:1944a3ffb0ac0f115067ee281d44a2073decb39ee472d7da05b97a268297c724": failed to resolve reference "127.0.0.1:39535/apps/private@sha256:1944a3ffb0ac0f115067ee281d44a2073decb39ee472d7da05b97a268297c724": pulling from host 127.0.0.1:39535 failed with status code [manifests sha256:1944a3ffb0ac0f115067ee281d44a2073decb39ee472d7da05b97a268297c724]: 401 Unauthorized`, KindAuth},
	{"layer blob 404", codes.NotFound,
		`failed to pull and unpack image "127.0.0.1:38685/apps/nolayer@sha256:1b583395a76001b0bcba6f178183659809249456a0f9cc669f080fad72b6dd1a": failed to copy: httpReadSeeker: failed open: could not fetch content descriptor sha256:a2c0f7281a6e9427261b6936f8cec5418edcbfc75fc171cb8ce90c229379569a (application/vnd.docker.image.rootfs.diff.tar.gzip) from remote: not found`, KindNotFound},
	{"connection cut mid-blob", codes.Unknown,
		`failed to pull and unpack image "127.0.0.1:38685/apps/cut@sha256:126758b10cf16dcae49473042014949ed45d588a20801905afefc74757fe9647": failed to read expected number of bytes: unexpected EOF`, KindRegistryUnreachable},
	{"tmpfs full while downloading", codes.Unknown,
		`failed to pull and unpack image "127.0.0.1:33907/apps/huge@sha256:bcbf0bd672e7567b8ea7229bdffee0532af70fca7221dda02fd56f70f14f30b0": failed to copy: write /tmp/ctfs4001655601/io.containerd.content.v1.content/ingest/f820715334afc6f21cf72e1f76682a734fd61461ed550d148e290702cf911e67/data: no space left on device`, KindOutOfSpace},
	{"existing connection, containerd gone", codes.Unavailable,
		`connection error: desc = "transport: Error while dialing: dial unix /tmp/ctrd1470811082/c.sock: connect: no such file or directory"`, KindRuntimeUnavailable},
	// Sent as Auth.ServerAddress, a bare host:port fails the pull (Client
	// no longer sends it); it is not an auth failure of the registry.
	{"server address host:port", codes.Unknown,
		`failed to pull and unpack image "127.0.0.1:38685/apps/private@sha256:1944a3ffb0ac0f115067ee281d44a2073decb39ee472d7da05b97a268297c724": failed to resolve reference "127.0.0.1:38685/apps/private@sha256:1944a3ffb0ac0f115067ee281d44a2073decb39ee472d7da05b97a268297c724": parse server address: parse "127.0.0.1:38685": first path segment in URL cannot contain colon`, KindUnknown},
}

func TestClassifyRealMessages(t *testing.T) {
	for _, tc := range append(realErrors, observedErrors...) {
		t.Run(tc.name, func(t *testing.T) {
			err := status.Error(tc.code, tc.msg)
			if got := Classify(err); got != tc.want {
				t.Errorf("Classify(%v) = %s, want %s", err, got, tc.want)
			}
			// The client wraps errors with what it was doing.
			wrapped := fmt.Errorf("pull %s: %w", ref, err)
			if got := Classify(wrapped); got != tc.want {
				t.Errorf("Classify(wrapped) = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestClassifyOther(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, ""},
		{"registry 401", status.Error(codes.Unknown, prefix+`failed to resolve reference "`+ref+`": pulling from host 127.0.0.1:5000 failed with status code [manifests sha256:0123]: 401 Unauthorized`), KindAuth},
		{"token server 401", status.Error(codes.Unknown, prefix+`failed to resolve reference "`+ref+`": failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized`), KindAuth},
		{"registry 503", status.Error(codes.Unknown, prefix+`failed to resolve reference "`+ref+`": pulling from host 127.0.0.1:5000 failed with status code [manifests sha256:0123]: 503 Service Unavailable`), KindRegistryUnreachable},
		{"dns", status.Error(codes.Unknown, prefix+`failed to do request: Head "https://nowhere.invalid/v2/": dial tcp: lookup nowhere.invalid: no such host`), KindRegistryUnreachable},
		{"canceled", status.Error(codes.Canceled, "context canceled"), KindCanceled},
		{"local deadline", fmt.Errorf("pull: %w", context.DeadlineExceeded), KindDeadline},
		{"local cancel", fmt.Errorf("pull: %w", context.Canceled), KindCanceled},
		{"dial failure", &unavailableError{socket: "/tmp/x.sock", state: "TRANSIENT_FAILURE"}, KindRuntimeUnavailable},
		{"oversized message", status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), KindUnknown},
		{"out of space wins over code", status.Error(codes.Internal, "write meta.db: no space left on device"), KindOutOfSpace},
		{"quota", errors.New("write: disk quota exceeded"), KindOutOfSpace},
		{"plain error", errors.New("something odd"), KindUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestKindTransient(t *testing.T) {
	for k, want := range map[Kind]bool{
		KindNotFound: false, KindOutOfSpace: false, KindAuth: false, KindInvalidReference: false, KindCanceled: false,
		KindRegistryUnreachable: true, KindRuntimeUnavailable: true, KindDeadline: true, KindUnknown: true,
	} {
		if got := k.Transient(); got != want {
			t.Errorf("%s.Transient() = %v, want %v", k, got, want)
		}
	}
}

func TestMessage(t *testing.T) {
	inner := status.Error(codes.NotFound, "failed to resolve reference: not found")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{inner, "failed to resolve reference: not found"},
		{fmt.Errorf("pull %s: %w", ref, inner), "failed to resolve reference: not found"},
		{errors.New("plain"), "plain"},
	} {
		if got := Message(tc.err); got != tc.want {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
