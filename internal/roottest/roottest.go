// Package roottest checks, from a main package's test, that its binary
// trusts the public root CAs on a host with none (as in bootroll's images,
// which have no /etc/ssl/certs): the main package must import
// golang.org/x/crypto/x509roots/fallback.
package roottest

import (
	"crypto/x509"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

const childEnv = "BOOTROLL_TEST_ROOTS_CHILD"

// Check runs the test binary again, as test name, with SSL_CERT_FILE and
// SSL_CERT_DIR pointing nowhere, and there verifies a public root
// certificate against the system pool. Without the fallback import that
// pool is empty and the verification fails with "certificate signed by
// unknown authority". Call it as the whole body of the test named name.
func Check(t *testing.T, name string) {
	t.Helper()
	if os.Getenv(childEnv) == "1" {
		verifyPublicRoot(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", "SSL_CERT_FILE=/nonexistent/ca.pem", "SSL_CERT_DIR=/nonexistent")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with no system CA files: %v\n%s", err, out)
	}
}

func verifyPublicRoot(t *testing.T) {
	t.Helper()
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
