package harness

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// APIProxy is a TLS reverse proxy in front of kube-apiserver that closes keep-alive connections
// once they have been idle for Idle, as kube-apiserver itself does (its http.Server has a fixed
// IdleTimeout of 90s, k8s.io/apiserver/pkg/server/secure_serving.go, no flag), only sooner. A
// streaming response (a watch) is not idle and is never cut. HTTP/1.1 only (like the webhook's
// client). Clients reach it with KubeconfigVia.
type APIProxy struct {
	URL    string // https://127.0.0.1:PORT
	CAFile string // CA of the proxy's serving certificate
	Idle   time.Duration
	// Closed counts the connections the proxy closed (idle or otherwise) and Opened the accepted ones.
	Opened, Closed atomic.Int64
	srv            *http.Server
}

// StartAPIProxy starts an APIProxy (stopped at the end of the test).
func (cp *ControlPlane) StartAPIProxy(t testing.TB, idle time.Duration) *APIProxy {
	t.Helper()
	certs := cp.WebhookCerts(t) // a serving certificate for 127.0.0.1 and its CA
	target, err := url.Parse(cp.APIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // stream watch events as they come
	rp.Transport = &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "tls.crt"), filepath.Join(certs, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &APIProxy{URL: "https://" + l.Addr().String(), CAFile: filepath.Join(certs, "ca.crt"), Idle: idle}
	p.srv = &http.Server{
		Handler:           rp,
		IdleTimeout:       idle,
		ReadHeaderTimeout: 30 * time.Second,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){}, // no h2
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				p.Opened.Add(1)
			case http.StateClosed, http.StateHijacked:
				p.Closed.Add(1)
			}
		},
	}
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	go func() { _ = p.srv.Serve(tl) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

// KubeconfigVia writes a copy of the control plane's kubeconfig (every identity) whose server is the
// proxy, and returns its path.
func (cp *ControlPlane) KubeconfigVia(t testing.TB, p *APIProxy) string {
	t.Helper()
	kc, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	apiCA, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	proxyCA, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(kc), "server: "+cp.APIServerURL, "server: "+p.URL)
	s = strings.ReplaceAll(s, base64.StdEncoding.EncodeToString(apiCA), base64.StdEncoding.EncodeToString(proxyCA))
	if !strings.Contains(s, p.URL) || !strings.Contains(s, base64.StdEncoding.EncodeToString(proxyCA)) {
		t.Fatal("KubeconfigVia: could not rewrite the kubeconfig's server and CA")
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-via-proxy")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
