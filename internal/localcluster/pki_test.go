package localcluster

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no CERTIFICATE block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func TestGeneratePKI(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	p, err := GeneratePKI(t.TempDir(), now)
	if err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, p.CACert())
	if !ca.IsCA {
		t.Errorf("CA certificate: IsCA false")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	serving := readCert(t, p.ServingCert())
	if _, err := serving.Verify(x509.VerifyOptions{
		DNSName: "127.0.0.1", Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		t.Errorf("serving certificate for 127.0.0.1: %v", err)
	}
	if _, err := serving.Verify(x509.VerifyOptions{DNSName: "10.0.0.1", Roots: roots, CurrentTime: now}); err == nil {
		t.Errorf("serving certificate verifies for 10.0.0.1: want only 127.0.0.1 and localhost")
	}

	admin := readCert(t, p.AdminCert())
	if _, err := admin.Verify(x509.VerifyOptions{
		Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		t.Errorf("admin client certificate: %v", err)
	}
	if got := admin.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("admin certificate organization = %v, want [system:masters]", got)
	}
	for name, c := range map[string]*x509.Certificate{"ca": ca, "serving": serving, "admin": admin} {
		if !c.NotBefore.Before(now) || !c.NotAfter.After(now.Add(24*time.Hour)) {
			t.Errorf("%s certificate valid %v to %v, want from before %v for at least a day", name, c.NotBefore, c.NotAfter, now)
		}
	}

	keyPEM, err := os.ReadFile(p.ServiceAccountKey())
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(keyPEM)
	key, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatalf("service-account key: %v", err)
	}
	pubPEM, err := os.ReadFile(p.ServiceAccountPub())
	if err != nil {
		t.Fatal(err)
	}
	blk, _ = pem.Decode(pubPEM)
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		t.Fatalf("service-account public key: %v", err)
	}
	if !key.PublicKey.Equal(pub.(*rsa.PublicKey)) {
		t.Errorf("sa.pub is not the public half of sa.key")
	}
	if st, err := os.Stat(p.AdminKey()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("admin.key mode: %v, %v; want 0600", st.Mode().Perm(), err)
	}
}
