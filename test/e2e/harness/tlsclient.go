package harness

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"testing"
	"time"
)

// ClientTLS is a TLS 1.2+ client configuration that trusts the CA bundle in caFile and, when
// certFile is not "", presents that client certificate (mTLS). It fails the test when a file cannot
// be read or caFile holds no certificate.
func ClientTLS(t testing.TB, caFile, certFile, keyFile string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// HTTPSClient is an HTTP client over ClientTLS with a 60 s timeout per request (a matchmaker
// calling the allocation gateway).
func HTTPSClient(t testing.TB, caFile, certFile, keyFile string) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: ClientTLS(t, caFile, certFile, keyFile)}}
}
