package harness

// A stand-in for agones-allocator's REST API (Agones v1.56, cmd/allocator + pkg/gameserverallocations):
// POST /gameserverallocation over mutual TLS, grpc-gateway's JSON (protojson field names), choosing a
// Ready GameServer and writing it exactly as the real allocator does (AllocateLikeAgonesWith: one
// full UPDATE with merged labels/annotations and agones.dev/last-allocated), then answering with
// the AllocationResponse built from the object kube-apiserver returned, with protojson's
// EmitUnpopulated (addresses, counters, lists, ports and metadata maps always present). Like the
// real one it does not default the request's namespace (none: no server, 429), answers an invalid
// request (a bad label or annotation key in metadata) with HTTP 500 and body code 422 (grpc-gateway
// maps the unknown gRPC code 422 to 500), and, when the request enables multiClusterSetting and a
// policy is set (AllocatorStandin.Policy), allocates in the policy's namespace: answered with
// source "local", or, for a policy naming a remote endpoint, with source = that endpoint (the
// server is then made in the policy's namespace of this same API server, standing in for the
// remote cluster's). What it does not emulate: counters/lists, priorities, Packed/Distributed
// scoring (it takes the first Ready server by name), forwarding over the network, and the gRPC
// port.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
)

// TestCA is a private ECDSA CA that issues serving and client certificates into files.
type TestCA struct {
	Dir    string
	CAFile string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// NewTestCA makes a CA named `name` in dir (dir/ca.crt).
func NewTestCA(t testing.TB, dir, name string) *TestCA {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &TestCA{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), cert: cert, key: key}
	ca.serial.Store(1)
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Issue writes dir/<base>.crt and dir/<base>.key: a leaf for `cn`, serving (with the IP/DNS
// SANs) when server is true, else a client certificate. Returns the two paths.
func (ca *TestCA) Issue(t testing.TB, base, cn string, server bool, sans ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, s := range sans {
			if ip := net.ParseIP(s); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, s)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.Dir, base+".crt"), filepath.Join(ca.Dir, base+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// Pool is the CA as a cert pool.
func (ca *TestCA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// AllocatorStandin is the running stand-in allocator.
type AllocatorStandin struct {
	URL    string // https://127.0.0.1:PORT
	CAFile string // its serving CA
	// ClientCert/ClientKey: a client certificate it accepts (issued by its client CA).
	ClientCert, ClientKey string
	Calls                 atomic.Int64 // POST /gameserverallocation requests received
	srv                   *http.Server
	ln                    net.Listener
	dyn                   dynamic.Interface
	mu                    sync.Mutex // one allocation at a time, as the allocator's batching does per cache
	// Delay, when set, is slept before each allocation (an allocator under load).
	Delay atomic.Int64
	cache *allocatorCache // AllocatorStandinOptions.Cached
	// Policy, when set, is the GameServerAllocationPolicy applied to requests with
	// multiClusterSetting.enabled (a request without it is allocated locally, as by Agones).
	Policy atomic.Pointer[MultiClusterPolicy]
}

// MultiClusterPolicy: the one connection a multi-cluster request goes to. RemoteEndpoint "" is the
// local cluster (allocationEndpoints empty): allocated in Namespace with source "local";
// otherwise the answer carries source RemoteEndpoint, as agones-allocator reports a forwarded one.
type MultiClusterPolicy struct {
	Namespace      string
	RemoteEndpoint string
}

// StartAllocatorStandin serves the stand-in on a free port of 127.0.0.1, writing GameServers as
// AgonesAllocator (the allocator's service account). Its certificates live in cp.Dir/allocator.
func (cp *ControlPlane) StartAllocatorStandin(t testing.TB) *AllocatorStandin {
	t.Helper()
	return cp.StartAllocatorStandinWith(t, AllocatorStandinOptions{})
}

// StartAllocatorStandinWith is StartAllocatorStandin with options (allocator_cached.go).
func (cp *ControlPlane) StartAllocatorStandinWith(t testing.TB, opts AllocatorStandinOptions) *AllocatorStandin {
	t.Helper()
	dir := filepath.Join(cp.Dir, "allocator", fmt.Sprintf("%d", webhookSeq.Add(1)))
	serving := NewTestCA(t, filepath.Join(dir, "serving"), "agones-allocator-ca")
	sans := opts.ServingSANs
	if len(sans) == 0 {
		sans = []string{"127.0.0.1", "localhost"}
	}
	crt, key := serving.Issue(t, "tls", "agones-allocator", true, sans...)
	clients := NewTestCA(t, filepath.Join(dir, "clients"), "allocator-client-ca")
	ccrt, ckey := clients.Issue(t, "client", "allocation-gateway", false)
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	a := &AllocatorStandin{CAFile: serving.CAFile, ClientCert: ccrt, ClientKey: ckey, dyn: cp.Dynamic(t, AgonesAllocator)}
	a.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.URL = "https://" + a.ln.Addr().String()
	if opts.Plain {
		a.URL = "http://" + a.ln.Addr().String()
	}
	mux := http.NewServeMux()
	if opts.Cached {
		a.cache = startAllocatorCache(t, cp)
		mux.HandleFunc("/gameserverallocation", a.serveCached)
	} else {
		mux.HandleFunc("/gameserverallocation", a.serve)
	}
	a.srv = &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clients.Pool(),
			MinVersion:   tls.VersionTLS12,
		},
		ErrorLog: nil,
	}
	if opts.Plain {
		a.srv.TLSConfig = nil
		go func() { _ = a.srv.Serve(a.ln) }()
	} else {
		go func() { _ = a.srv.ServeTLS(a.ln, "", "") }()
	}
	t.Cleanup(a.Stop)
	return a
}

// Stop closes the listener and every connection (the allocator is down).
func (a *AllocatorStandin) Stop() { _ = a.srv.Close() }

// The request fields the stand-in reads (allocation.proto, protojson names).
type allocationRequest struct {
	Namespace           string `json:"namespace"`
	GameServerSelectors []struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"gameServerSelectors"`
	Metadata *struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	MultiClusterSetting *struct {
		Enabled bool `json:"enabled"`
	} `json:"multiClusterSetting"`
}

type allocationPort struct {
	Name string `json:"name"`
	Port int64  `json:"port"`
}

// protojson with EmitUnpopulated: every field present, empty lists and maps included.
type allocationResponse struct {
	GameServerName string                 `json:"gameServerName"`
	Ports          []allocationPort       `json:"ports"`
	Address        string                 `json:"address"`
	Addresses      []map[string]string    `json:"addresses"`
	NodeName       string                 `json:"nodeName"`
	Source         string                 `json:"source"`
	Metadata       allocationMetadata     `json:"metadata"`
	Counters       map[string]interface{} `json:"counters"`
	Lists          map[string]interface{} `json:"lists"`
}

type allocationMetadata struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// grpc-gateway's error body for a gRPC status.
func writeGrpcError(w http.ResponseWriter, httpStatus, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(map[string]interface{}{"code": code, "message": msg, "details": []interface{}{}})
}

func (a *AllocatorStandin) serve(w http.ResponseWriter, r *http.Request) {
	a.Calls.Add(1)
	if r.Method != http.MethodPost {
		writeGrpcError(w, http.StatusNotImplemented, 12, "Method Not Allowed")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeGrpcError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	var req allocationRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeGrpcError(w, http.StatusBadRequest, 3, err.Error())
		return
	}
	if msg := invalidMetadata(req); msg != "" {
		// Allocate returns a 422 metav1.Status; processAllocationRequest turns it into gRPC code 422,
		// which grpc-gateway answers as HTTP 500.
		writeGrpcError(w, http.StatusInternalServerError, http.StatusUnprocessableEntity, msg)
		return
	}
	source := "local"
	if req.MultiClusterSetting != nil && req.MultiClusterSetting.Enabled {
		p := a.Policy.Load()
		if p == nil {
			writeGrpcError(w, http.StatusInternalServerError, 2, "no multi-cluster allocation policy is specified")
			return
		}
		req.Namespace = p.Namespace
		if p.RemoteEndpoint != "" {
			source = p.RemoteEndpoint
		}
	}
	if req.Namespace == "" {
		// No namespace defaulting: the allocation cache matches none (UnAllocated).
		writeGrpcError(w, http.StatusTooManyRequests, 8, "there is no available GameServer to allocate")
		return
	}
	if d := time.Duration(a.Delay.Load()); d > 0 {
		time.Sleep(d)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var alloc Allocation
	if req.Metadata != nil {
		alloc.Labels, alloc.Annotations = req.Metadata.Labels, req.Metadata.Annotations
	}
	// The allocator retries on conflicts with the next candidate (its batch loop).
	for attempt := 0; attempt < 5; attempt++ {
		name, err := a.pick(ctx, req)
		if err != nil {
			writeGrpcError(w, http.StatusInternalServerError, 13, err.Error())
			return
		}
		if name == "" {
			// convertStateV1ToError: UnAllocated -> ResourceExhausted (HTTP 429).
			writeGrpcError(w, http.StatusTooManyRequests, 8, "there is no available GameServer to allocate")
			return
		}
		got, err := AllocateLikeAgonesWith(ctx, a.dyn, req.Namespace, name, alloc)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			writeGrpcError(w, http.StatusInternalServerError, 13, err.Error())
			return
		}
		writeResponseFrom(w, got, source)
		return
	}
	writeGrpcError(w, http.StatusTooManyRequests, 8, "there is no available GameServer to allocate")
}

// invalidMetadata: what GameServerAllocation validation refuses in the request's metadata (label
// and annotation keys), as a message; "" when valid.
func invalidMetadata(req allocationRequest) string {
	if req.Metadata == nil {
		return ""
	}
	for _, m := range []map[string]string{req.Metadata.Labels, req.Metadata.Annotations} {
		for k := range m {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Sprintf("GameServerAllocation.allocation.agones.dev \"\" is invalid: spec.metadata: Invalid value: %q: %s", k, errs[0])
			}
		}
	}
	return ""
}

// pick: the first Ready, not deleting GameServer (by name) matching one of the selectors.
func (a *AllocatorStandin) pick(ctx context.Context, req allocationRequest) (string, error) {
	list, err := a.dyn.Resource(GameServerGVR).Namespace(req.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	for i := range items {
		gs := &items[i]
		if State(gs) != "Ready" || gs.GetDeletionTimestamp() != nil {
			continue
		}
		if len(req.GameServerSelectors) == 0 {
			return gs.GetName(), nil
		}
		for _, sel := range req.GameServerSelectors {
			if labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(gs.GetLabels())) {
				return gs.GetName(), nil
			}
		}
	}
	return "", nil
}

func writeResponse(w http.ResponseWriter, gs *unstructured.Unstructured) {
	writeResponseFrom(w, gs, "local")
}

func writeResponseFrom(w http.ResponseWriter, gs *unstructured.Unstructured, source string) {
	res := allocationResponse{
		Ports:     []allocationPort{},
		Addresses: []map[string]string{},
		Counters:  map[string]interface{}{},
		Lists:     map[string]interface{}{},
		Metadata:  allocationMetadata{Labels: map[string]string{}, Annotations: map[string]string{}},
	}
	res.GameServerName = gs.GetName()
	res.Address, _, _ = unstructured.NestedString(gs.Object, "status", "address")
	res.NodeName, _, _ = unstructured.NestedString(gs.Object, "status", "nodeName")
	res.Source = source
	addrs, _, _ := unstructured.NestedSlice(gs.Object, "status", "addresses")
	for _, ad := range addrs {
		m, _ := ad.(map[string]interface{})
		entry := map[string]string{}
		for k, v := range m {
			if sv, ok := v.(string); ok {
				entry[k] = sv
			}
		}
		res.Addresses = append(res.Addresses, entry)
	}
	ports, _, _ := unstructured.NestedSlice(gs.Object, "status", "ports")
	for _, p := range ports {
		m, _ := p.(map[string]interface{})
		name, _ := m["name"].(string)
		port, _ := m["port"].(int64)
		res.Ports = append(res.Ports, allocationPort{Name: name, Port: port})
	}
	for k, v := range gs.GetLabels() {
		res.Metadata.Labels[k] = v
	}
	for k, v := range gs.GetAnnotations() {
		res.Metadata.Annotations[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}
