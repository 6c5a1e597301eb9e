package cri

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FuzzAuthFor: any pull secret and reference either parse or fail with an
// error that does not quote the secret's password.
func FuzzAuthFor(f *testing.F) {
	f.Add(`{"auths":{"quay.io":{"username":"u","password":"hunter2"}}}`, "quay.io/a/b@sha256:"+strings.Repeat("0", 64))
	f.Add(`{"auths":{"quay.io":{"auth":"dTpodW50ZXIy"}}}`, "quay.io/a")
	f.Add(`{"auths":{"https://index.docker.io/v1/":{"auth":"%%"}}}`, "busybox")
	f.Fuzz(func(t *testing.T, config, ref string) {
		a, err := AuthFor([]byte(config), ref)
		if err != nil {
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error quotes the password: %v", err)
			}
			return
		}
		if a != nil && strings.Contains(a.String(), "hunter2") {
			t.Errorf("String quotes the password: %s", a)
		}
	})
}

// FuzzClassify: every message classifies, and out of space always wins.
func FuzzClassify(f *testing.F) {
	for _, e := range realErrors {
		f.Add(uint32(e.code), e.msg)
	}
	f.Fuzz(func(t *testing.T, code uint32, msg string) {
		err := status.Error(codes.Code(code%16+1), msg) // never OK: that is no error
		k := Classify(err)
		if k == "" {
			t.Fatalf("Classify(%v) = empty", err)
		}
		if strings.Contains(strings.ToLower(msg), "no space left on device") && k != KindOutOfSpace {
			t.Errorf("Classify(%v) = %s, want OutOfSpace", err, k)
		}
		_ = Classify(errors.New(msg))
	})
}
