package harness

// A stand-in for agones-allocator (Agones v1.56, cmd/allocator + pkg/gameserverallocations): its gRPC
// API (allocation.AllocationService/Allocate) and its REST API (POST /gameserverallocation) on one
// mutual-TLS port, as agones-allocator's runMux serves them: ALPN h2 and http/1.1, an HTTP/2
// request with content-type application/grpc to the gRPC server, every other request to the REST
// handler. Both are one Allocate, as in Agones, where grpc-gateway calls the gRPC handler: the REST
// body is read with protojson (DiscardUnknown) into the same AllocationRequest, the answer is the
// same AllocationResponse (written with protojson EmitUnpopulated, so addresses, counters, lists,
// ports and the metadata maps are always present), and an error is the same gRPC status (REST:
// grpc-gateway's body {code, message, details} with the HTTP status grpc-gateway maps the code to).
// Allocate chooses a Ready GameServer and writes it exactly as the real allocator does
// (AllocateLikeAgonesWith: one full UPDATE with merged labels/annotations and
// agones.dev/last-allocated), and answers from the object kube-apiserver returned, the fields filled
// as Agones' ConvertGSAToAllocationResponse fills them. Like the real one it does not default the
// request's namespace (none: no server, ResourceExhausted / HTTP 429), answers an invalid request (a
// bad label or annotation key in metadata) with gRPC code 422 (REST: HTTP 500 with body code 422,
// grpc-gateway's mapping of an unknown code), and, when the request enables multiClusterSetting and
// a policy is set (AllocatorStandin.Policy), allocates in the policy's namespace: answered with
// source "local", or, for a policy naming a remote endpoint, with source = that endpoint (the server
// is then made in the policy's namespace of this same API server, standing in for the remote
// cluster's). What it does not emulate: counters/lists, priorities, the deprecated
// requiredGameServerSelector/preferredGameServerSelectors/metaPatch fields, Packed/Distributed
// scoring (it takes the first Ready server by name), forwarding over the network, gRPC keepalive
// enforcement, and certificate reloading. With Plain (as --disable-tls) it serves HTTP/1.1 only,
// as the real allocator's plain listener does (no h2c), so no gRPC.

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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
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
	URL    string // https://127.0.0.1:PORT (REST and gRPC), http:// with Plain
	Addr   string // 127.0.0.1:PORT, for a gRPC client
	CAFile string // its serving CA
	// ClientCert/ClientKey: a client certificate it accepts (issued by its client CA).
	ClientCert, ClientKey string
	Calls                 atomic.Int64 // POST /gameserverallocation requests received (REST)
	GRPCCalls             atomic.Int64 // allocation.AllocationService/Allocate calls received
	srv                   *http.Server
	grpcSrv               *grpc.Server
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
	a.Addr = a.ln.Addr().String()
	a.URL = "https://" + a.Addr
	if opts.Plain {
		a.URL = "http://" + a.Addr
	}
	if opts.Cached {
		a.cache = startAllocatorCache(t, cp)
	}
	rest := http.NewServeMux()
	rest.HandleFunc("/gameserverallocation", a.serveREST)
	a.grpcSrv = grpc.NewServer()
	pb.RegisterAllocationServiceServer(a.grpcSrv, allocationService{a: a})
	a.srv = &http.Server{
		// agones-allocator's grpcHandlerFunc: gRPC by protocol and content-type, REST otherwise.
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				a.grpcSrv.ServeHTTP(w, r)
				return
			}
			rest.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clients.Pool(),
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
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
func (a *AllocatorStandin) Stop() {
	_ = a.srv.Close()
	a.grpcSrv.Stop()
}

// allocationService is the gRPC face of the stand-in: the same Allocate as REST.
type allocationService struct {
	pb.UnimplementedAllocationServiceServer
	a *AllocatorStandin
}

func (s allocationService) Allocate(ctx context.Context, req *pb.AllocationRequest) (*pb.AllocationResponse, error) {
	s.a.GRPCCalls.Add(1)
	return s.a.allocate(ctx, req)
}

// grpc-gateway's marshaler as agones-allocator's REST mux uses it (gw_runtime.NewServeMux's default).
var (
	restMarshal   = protojson.MarshalOptions{EmitUnpopulated: true}
	restUnmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// httpStatusFromCode is grpc-gateway's HTTPStatusFromCode: the HTTP status of a REST error.
func httpStatusFromCode(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	default: // Unknown, Internal, DataLoss, and codes outside gRPC's (422)
		return http.StatusInternalServerError
	}
}

// writeStatus writes a gRPC status as grpc-gateway's error body, with its HTTP status.
func writeStatus(w http.ResponseWriter, st *status.Status) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatusFromCode(st.Code()))
	_ = json.NewEncoder(w).Encode(map[string]interface{}{"code": int(st.Code()), "message": st.Message(), "details": []interface{}{}})
}

// serveREST is the REST face: grpc-gateway's handler of POST /gameserverallocation.
func (a *AllocatorStandin) serveREST(w http.ResponseWriter, r *http.Request) {
	a.Calls.Add(1)
	if r.Method != http.MethodPost {
		writeStatus(w, status.New(codes.Unimplemented, "Method Not Allowed"))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeStatus(w, status.New(codes.InvalidArgument, err.Error()))
		return
	}
	req := &pb.AllocationRequest{}
	if err := restUnmarshal.Unmarshal(body, req); err != nil {
		writeStatus(w, status.New(codes.InvalidArgument, err.Error()))
		return
	}
	res, err := a.allocate(r.Context(), req)
	if err != nil {
		writeStatus(w, status.Convert(err))
		return
	}
	out, err := restMarshal.Marshal(res)
	if err != nil {
		writeStatus(w, status.New(codes.Internal, err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// errNoServer is convertStateV1ToError for UnAllocated (the default --grpc-unallocated-status-code).
var errNoServer = status.Error(codes.ResourceExhausted, "there is no available GameServer to allocate")

// allocate is Agones' serviceHandler.Allocate for both faces: an answer, or a gRPC status error.
func (a *AllocatorStandin) allocate(ctx context.Context, req *pb.AllocationRequest) (*pb.AllocationResponse, error) {
	if msg := invalidMetadata(req); msg != "" {
		// Allocate returns a 422 metav1.Status; serviceHandler.Allocate turns it into gRPC code 422
		// (grpc-gateway answers it as HTTP 500).
		return nil, status.Error(codes.Code(http.StatusUnprocessableEntity), msg)
	}
	ns, source := req.GetNamespace(), "local"
	if req.GetMultiClusterSetting().GetEnabled() {
		p := a.Policy.Load()
		if p == nil {
			return nil, status.Error(codes.Unknown, "no multi-cluster allocation policy is specified")
		}
		ns = p.Namespace
		if p.RemoteEndpoint != "" {
			source = p.RemoteEndpoint
		}
	}
	if ns == "" {
		// No namespace defaulting: the allocation cache matches none (UnAllocated).
		return nil, errNoServer
	}
	if d := time.Duration(a.Delay.Load()); d > 0 {
		time.Sleep(d)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var alloc Allocation
	if md := req.GetMetadata(); md != nil {
		alloc.Labels, alloc.Annotations = md.GetLabels(), md.GetAnnotations()
	}
	var got *unstructured.Unstructured
	var err error
	if a.cache != nil {
		got, err = a.allocateCached(ctx, ns, req.GetGameServerSelectors(), alloc)
	} else {
		got, err = a.allocateListed(ctx, ns, req.GetGameServerSelectors(), alloc)
	}
	if err != nil {
		return nil, err
	}
	return responseFrom(got, source), nil
}

// allocateListed: a LIST per request and one allocation at a time; the allocator retries on
// conflicts with the next candidate (its batch loop).
func (a *AllocatorStandin) allocateListed(ctx context.Context, ns string, sels []*pb.GameServerSelector, alloc Allocation) (*unstructured.Unstructured, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for attempt := 0; attempt < 5; attempt++ {
		name, err := a.pick(ctx, ns, sels)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if name == "" {
			return nil, errNoServer
		}
		got, err := AllocateLikeAgonesWith(ctx, a.dyn, ns, name, alloc)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return got, nil
	}
	return nil, errNoServer
}

// invalidMetadata: what GameServerAllocation validation refuses in the request's metadata (label
// and annotation keys), as a message; "" when valid.
func invalidMetadata(req *pb.AllocationRequest) string {
	md := req.GetMetadata()
	for _, m := range []map[string]string{md.GetLabels(), md.GetAnnotations()} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the same message for the same request, whatever the map order
		for _, k := range keys {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Sprintf("GameServerAllocation.allocation.agones.dev \"\" is invalid: spec.metadata: Invalid value: %q: %s", k, errs[0])
			}
		}
	}
	return ""
}

// selected: whether gs matches one of the selectors' matchLabels (no selector matches every one).
func selected(gs *unstructured.Unstructured, sels []*pb.GameServerSelector) bool {
	if len(sels) == 0 {
		return true
	}
	for _, sel := range sels {
		if labels.SelectorFromSet(sel.GetMatchLabels()).Matches(labels.Set(gs.GetLabels())) {
			return true
		}
	}
	return false
}

// pick: the first Ready, not deleting GameServer (by name) matching one of the selectors.
func (a *AllocatorStandin) pick(ctx context.Context, ns string, sels []*pb.GameServerSelector) (string, error) {
	list, err := a.dyn.Resource(GameServerGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	for i := range items {
		gs := &items[i]
		if State(gs) == "Ready" && gs.GetDeletionTimestamp() == nil && selected(gs, sels) {
			return gs.GetName(), nil
		}
	}
	return "", nil
}

// responseFrom is Agones' ConvertGSAToAllocationResponse of the GameServerAllocation the allocator
// builds from the written GameServer (status: name, ports, address, addresses, nodeName, source,
// metadata = the GameServer's labels and annotations; counters and lists are not emulated).
func responseFrom(gs *unstructured.Unstructured, source string) *pb.AllocationResponse {
	res := &pb.AllocationResponse{
		GameServerName: gs.GetName(),
		Source:         source,
		Metadata:       &pb.AllocationResponse_GameServerMetadata{Labels: gs.GetLabels(), Annotations: gs.GetAnnotations()},
	}
	res.Address, _, _ = unstructured.NestedString(gs.Object, "status", "address")
	res.NodeName, _, _ = unstructured.NestedString(gs.Object, "status", "nodeName")
	addrs, _, _ := unstructured.NestedSlice(gs.Object, "status", "addresses")
	for _, ad := range addrs {
		m, _ := ad.(map[string]interface{})
		typ, _ := m["type"].(string)
		addr, _ := m["address"].(string)
		res.Addresses = append(res.Addresses, &pb.AllocationResponse_GameServerStatusAddress{Type: typ, Address: addr})
	}
	ports, _, _ := unstructured.NestedSlice(gs.Object, "status", "ports")
	for _, p := range ports {
		m, _ := p.(map[string]interface{})
		name, _ := m["name"].(string)
		port, _ := m["port"].(int64)
		res.Ports = append(res.Ports, &pb.AllocationResponse_GameServerStatusPort{Name: name, Port: int32(port)})
	}
	return res
}
