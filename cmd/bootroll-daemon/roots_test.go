package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// TestFallbackRoots checks that the binary trusts the public root CAs on a
// host with none, as in its image (no /etc/ssl/certs): a child process
// with SSL_CERT_FILE and SSL_CERT_DIR pointing nowhere verifies a public
// root certificate against the system pool. Without the fallback import
// (roots.go) that pool is empty and the verification fails with
// "certificate signed by unknown authority".
func TestFallbackRoots(t *testing.T) {
	if os.Getenv("BOOTROLL_TEST_ROOTS_CHILD") == "1" {
		verifyPublicRoot(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFallbackRoots$", "-test.v")
	cmd.Env = append(os.Environ(), "BOOTROLL_TEST_ROOTS_CHILD=1",
		"SSL_CERT_FILE=/nonexistent/ca.pem", "SSL_CERT_DIR=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with no system CA files: %v\n%s", err, out)
	}
}

func verifyPublicRoot(t *testing.T) {
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		cert, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{}); err != nil {
			t.Fatalf("verify %s against the system pool: %v", cert.Subject, err)
		}
		return
	}
	t.Fatal("the fallback bundle holds no unconstrained root")
}
