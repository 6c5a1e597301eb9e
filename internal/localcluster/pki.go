package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is where the certificates and keys of a local cluster are, as files
// in one directory. Everything is made fresh by each `cluster up`.
type PKI struct {
	Dir string
}

// Paths of the PKI's files.
func (p PKI) CACert() string            { return filepath.Join(p.Dir, "ca.crt") }
func (p PKI) CAKey() string             { return filepath.Join(p.Dir, "ca.key") }
func (p PKI) ServingCert() string       { return filepath.Join(p.Dir, "apiserver.crt") }
func (p PKI) ServingKey() string        { return filepath.Join(p.Dir, "apiserver.key") }
func (p PKI) AdminCert() string         { return filepath.Join(p.Dir, "admin.crt") }
func (p PKI) AdminKey() string          { return filepath.Join(p.Dir, "admin.key") }
func (p PKI) ServiceAccountKey() string { return filepath.Join(p.Dir, "sa.key") }
func (p PKI) ServiceAccountPub() string { return filepath.Join(p.Dir, "sa.pub") }

// certValidity is how long the generated certificates are valid: a local
// cluster lives for a test or a working day.
const certValidity = 30 * 24 * time.Hour

// GeneratePKI writes into dir a CA, a serving certificate for 127.0.0.1
// and localhost signed by it, an admin client certificate
// (CN=bootroll-admin, O=system:masters) and an RSA service-account key pair.
// now is the certificates' NotBefore (less a minute for clock skew).
func GeneratePKI(dir string, now time.Time) (PKI, error) {
	p := PKI{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, fmt.Errorf("creating the PKI directory: %w", err)
	}
	notBefore := now.Add(-time.Minute)
	notAfter := now.Add(certValidity)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, fmt.Errorf("generating the CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "bootroll-local-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, fmt.Errorf("signing the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return p, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	if err := writeCert(p.CACert(), caDER); err != nil {
		return p, err
	}
	if err := writeECKey(p.CAKey(), caKey); err != nil {
		return p, err
	}

	leaf := func(certPath, keyPath string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("generating the key of %s: %w", certPath, err)
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("signing %s: %w", certPath, err)
		}
		if err := writeCert(certPath, der); err != nil {
			return err
		}
		return writeECKey(keyPath, key)
	}
	if err := leaf(p.ServingCert(), p.ServingKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	}); err != nil {
		return p, err
	}
	if err := leaf(p.AdminCert(), p.AdminKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "bootroll-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return p, err
	}

	// The service-account token signer: RSA, which every component accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, fmt.Errorf("generating the service-account key: %w", err)
	}
	if err := writePEM(p.ServiceAccountKey(), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey), 0o600); err != nil {
		return p, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, fmt.Errorf("encoding the service-account public key: %w", err)
	}
	if err := writePEM(p.ServiceAccountPub(), "PUBLIC KEY", pub, 0o644); err != nil {
		return p, err
	}
	return p, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeCert(path string, der []byte) error {
	return writePEM(path, "CERTIFICATE", der, 0o644)
}

func writeECKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
