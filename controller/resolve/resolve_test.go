package resolve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/bootroll/bootroll/internal/imageref"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func FuzzDigest(f *testing.F) {
	f.Add("quay.io/fedora/fedora-bootc@" + testDigest)
	f.Add("a@sha256:short")
	f.Add("ubuntu:latest")
	f.Fuzz(func(t *testing.T, ref string) {
		if imageref.IsDigest(ref) != (imageref.Digest(ref) != "") {
			t.Errorf("imageref.IsDigest(%q) = %v but Digest = %q", ref, imageref.IsDigest(ref), imageref.Digest(ref))
		}
		if !imageref.IsDigest(ref) {
			return
		}
		// A digest ref round-trips through Resolve without a registry.
		got, err := (&Registry{}).Resolve(context.Background(), ref, nil)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", ref, err)
		}
		if !imageref.IsDigest(got) || imageref.Digest(got) != imageref.Digest(ref) {
			t.Errorf("Resolve(%q) = %q, which does not carry digest %q", ref, got, imageref.Digest(ref))
		}
	})
}

func TestKindOf(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want ErrorKind
	}{
		{name: "nil", err: nil, want: ""},
		{name: "plain error", err: cause, want: KindUnknown},
		{name: "Error", err: &Error{Kind: KindNotFound, Ref: "r", Err: cause}, want: KindNotFound},
		{name: "wrapped Error", err: fmt.Errorf("reconcile pool: %w", &Error{Kind: KindUnauthorized, Ref: "r", Err: cause}), want: KindUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KindOf(tt.err); got != tt.want {
				t.Errorf("KindOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorUnwrap(t *testing.T) {
	cause := errors.New("boom")
	err := &Error{Kind: KindUnknown, Ref: "quay.io/a:b", Err: cause}
	if !errors.Is(err, cause) {
		t.Errorf("errors.Is(%v, cause) = false", err)
	}
	if got, want := err.Error(), `resolve image "quay.io/a:b": Unknown: boom`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestClassify(t *testing.T) {
	_, badName := name.ParseReference("UPPER/case")
	diag := func(code transport.ErrorCode, status int) error {
		return &transport.Error{StatusCode: status, Errors: []transport.Diagnostic{{Code: code}}}
	}
	status := func(code int) error { return &transport.Error{StatusCode: code} }
	tests := []struct {
		name string
		err  error
		want ErrorKind
	}{
		{name: "bad name", err: badName, want: KindInvalidReference},
		{name: "404", err: status(http.StatusNotFound), want: KindNotFound},
		{name: "MANIFEST_UNKNOWN", err: diag(transport.ManifestUnknownErrorCode, http.StatusNotFound), want: KindNotFound},
		{name: "NAME_UNKNOWN on 400", err: diag(transport.NameUnknownErrorCode, http.StatusBadRequest), want: KindNotFound},
		{name: "401", err: status(http.StatusUnauthorized), want: KindUnauthorized},
		{name: "403", err: status(http.StatusForbidden), want: KindUnauthorized},
		{name: "DENIED", err: diag(transport.DeniedErrorCode, http.StatusForbidden), want: KindUnauthorized},
		{name: "UNAUTHORIZED", err: diag(transport.UnauthorizedErrorCode, http.StatusUnauthorized), want: KindUnauthorized},
		{name: "502", err: status(http.StatusBadGateway), want: KindUnreachable},
		{name: "503", err: status(http.StatusServiceUnavailable), want: KindUnreachable},
		{name: "504", err: status(http.StatusGatewayTimeout), want: KindUnreachable},
		{name: "405", err: status(http.StatusMethodNotAllowed), want: KindUnknown},
		{name: "500", err: status(http.StatusInternalServerError), want: KindUnknown},
		{name: "429", err: status(http.StatusTooManyRequests), want: KindUnknown},
		{name: "wrapped 404", err: fmt.Errorf("get manifest: %w", status(http.StatusNotFound)), want: KindNotFound},
		{name: "connection refused", err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, want: KindUnreachable},
		{name: "DNS", err: &net.DNSError{Err: "no such host", Name: "reg.invalid", IsNotFound: true}, want: KindUnreachable},
		{name: "deadline", err: fmt.Errorf("ping: %w", context.DeadlineExceeded), want: KindUnreachable},
		{name: "reset", err: fmt.Errorf("read: %w", syscall.ECONNRESET), want: KindUnreachable},
		{name: "unexpected EOF", err: io.ErrUnexpectedEOF, want: KindUnreachable},
		{name: "canceled", err: fmt.Errorf("ping: %w", context.Canceled), want: KindUnknown},
		{name: "other", err: errors.New("response did not include Docker-Content-Digest header"), want: KindUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
