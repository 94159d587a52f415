package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// clientCert mints a client certificate (CN=user, O=group) signed by the control plane's CA.
func clientCert(t *testing.T, cp *harness.ControlPlane, user, group string) (certPEM, keyPEM []byte) {
	t.Helper()
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(filepath.Dir(cp.CAFile), "ca.key"))
	if err != nil {
		t.Skipf("no CA key next to %s: %v", cp.CAFile, err)
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(caKeyPEM)
	if cb == nil || kb == nil {
		t.Fatal("cannot decode the CA")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var caKey interface{}
	if caKey, err = x509.ParsePKCS8PrivateKey(kb.Bytes); err != nil {
		if caKey, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			if caKey, err = x509.ParsePKCS1PrivateKey(kb.Bytes); err != nil {
				t.Fatalf("CA key: %v", err)
			}
		}
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: []string{group}},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// TestClientCertificateAuth: a kubeconfig with inline client-certificate-data / client-key-data and
// certificate-authority-data (no token) runs every verb.
func TestClientCertificateAuth(t *testing.T) {
	cp := harness.Setup(t)
	ensureFastCompaction(t, cp)
	ns := cp.Namespace(t)
	certPEM, keyPEM := clientCert(t, cp, "cert-admin", "system:masters")
	caPEM, _ := os.ReadFile(cp.CAFile)
	b64 := base64.StdEncoding.EncodeToString
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: cert
clusters:
- name: e2e
  cluster: {server: %q, certificate-authority-data: %s}
contexts:
- name: cert
  context: {cluster: e2e, user: cert}
users:
- name: cert
  user: {client-certificate-data: %s, client-key-data: %s}
`, cp.APIServerURL, b64(caPEM), b64(certPEM), b64(keyPEM))
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := runSmoke(t, p, "cert", "verbs", ns)
	if err != nil || lines[len(lines)-1] != "PASS verbs" {
		t.Fatalf("verbs with a client certificate: %v\n%s", err, strings.Join(lines, "\n"))
	}

	// A CA that did not sign the API server's certificate: the TLS handshake must fail (never an
	// unverified connection).
	otherCA, _ := clientCert(t, cp, "not-a-ca", "x")
	bad := strings.Replace(kc, b64(caPEM), b64(otherCA), 1)
	if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err = runSmoke(t, p, "cert", "verbs", ns)
	if err == nil || !strings.Contains(strings.Join(lines, "\n"), "FAIL create: transport error") {
		t.Fatalf("an unverifiable API server certificate was accepted: %v\n%s", err, strings.Join(lines, "\n"))
	}
}
