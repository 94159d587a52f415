// The stand-in agones-allocator itself (harness/allocator.go, issue 23 part 6): its gRPC and REST
// faces share one mTLS port, as agones-allocator's do, and answer the same request with the same
// AllocationResponse, field by field, and the same errors (the gRPC status, and grpc-gateway's REST
// rendering of it). Called directly, without the gateway, so that the gateway's tests stand on an
// allocator that answers as the real one does over both protocols.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
	"github.com/agones-allocating-webhook/e2e/harness"
)

// standinClients: a REST client (HTTP/1.1, as a default Go client), a REST client over HTTP/2, and a
// gRPC connection, all to the same address with the stand-in's client certificate.
type standinClients struct {
	a      *harness.AllocatorStandin
	rest   *http.Client
	rest2  *http.Client
	grpcpb pb.AllocationServiceClient
}

func newStandinClients(t *testing.T, a *harness.AllocatorStandin) *standinClients {
	t.Helper()
	tlsc := harness.ClientTLS(t, a.CAFile, a.ClientCert, a.ClientKey)
	conn, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsc.Clone())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &standinClients{
		a:      a,
		rest:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsc.Clone()}},
		rest2:  &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsc.Clone(), ForceAttemptHTTP2: true}},
		grpcpb: pb.NewAllocationServiceClient(conn),
	}
}

// restResult is one REST answer: the status, the body's keys, and the body as the proto message
// (an AllocationResponse for 200, else the error's code and message).
type restResult struct {
	proto   int
	status  int
	keys    map[string]json.RawMessage
	res     *pb.AllocationResponse
	code    int
	message string
}

func (c *standinClients) postREST(t *testing.T, client *http.Client, req *pb.AllocationRequest) restResult {
	t.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPost, c.a.URL+"/gameserverallocation", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	res, err := client.Do(hr)
	if err != nil {
		t.Fatalf("REST: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := restResult{proto: res.ProtoMajor, status: res.StatusCode}
	if err := json.Unmarshal(raw, &r.keys); err != nil {
		t.Fatalf("REST answer is not a JSON object: %d %s", res.StatusCode, raw)
	}
	if res.StatusCode == http.StatusOK {
		r.res = &pb.AllocationResponse{}
		if err := protojson.Unmarshal(raw, r.res); err != nil {
			t.Fatalf("REST answer is not an AllocationResponse: %v\n%s", err, raw)
		}
		return r
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("REST error body: %v\n%s", err, raw)
	}
	r.code, r.message = e.Code, e.Message
	return r
}

// readyServer creates a GameServer in ns and moves it to Ready with every field the answer carries
// (address, addresses, nodeName, two ports), as Agones would.
func readyServer(t *testing.T, cp *harness.ControlPlane, ns, name string, labels map[string]string) {
	t.Helper()
	c := cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(ns)
	gs := harness.NewGameServer(name, false) // not opted in: no labels of its own
	gs.SetLabels(labels)
	created, err := c.Create(harness.Ctx(t), gs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
	_ = unstructured.SetNestedField(created.Object, "10.0.0.7", "status", "address")
	_ = unstructured.SetNestedField(created.Object, "node-7", "status", "nodeName")
	_ = unstructured.SetNestedSlice(created.Object, []interface{}{
		map[string]interface{}{"type": "InternalIP", "address": "10.0.0.7"},
		map[string]interface{}{"type": "Hostname", "address": "node-7"},
	}, "status", "addresses")
	_ = unstructured.SetNestedSlice(created.Object, []interface{}{
		map[string]interface{}{"name": "game", "port": int64(7001)},
		map[string]interface{}{"name": "query", "port": int64(7002)},
	}, "status", "ports")
	if _, err := c.Update(harness.Ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("move %s to Ready: %v", name, err)
	}
}

// normalized: the answer without what differs between two allocations of twin servers (the name,
// and agones.dev/last-allocated, checked apart); the caller's copy is left alone.
func normalized(t *testing.T, res *pb.AllocationResponse) *pb.AllocationResponse {
	t.Helper()
	n := proto.Clone(res).(*pb.AllocationResponse)
	n.GameServerName = ""
	if n.Metadata == nil {
		t.Fatalf("no metadata in %v", res)
	}
	ts := n.Metadata.Annotations[harness.LastAllocatedKey]
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
		t.Errorf("%s: last-allocated %q: %v", res.GameServerName, ts, err)
	}
	delete(n.Metadata.Annotations, harness.LastAllocatedKey)
	return n
}

func TestAllocatorStandinGRPCAndRESTOnOnePort(t *testing.T) {
	cp := harness.Setup(t)
	a := cp.StartAllocatorStandin(t)
	c := newStandinClients(t, a)
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 2*time.Minute)
	defer cancel()

	t.Run("SameAnswer", func(t *testing.T) {
		ns := cp.Namespace(t)
		fleet := map[string]string{"agones.dev/fleet": "arena"}
		for _, name := range []string{"gs-1", "gs-2", "gs-3"} {
			readyServer(t, cp, ns, name, fleet)
		}
		req := &pb.AllocationRequest{
			Namespace:           ns,
			GameServerSelectors: []*pb.GameServerSelector{{MatchLabels: fleet}},
			Metadata: &pb.MetaPatch{Labels: map[string]string{"match": "m-1"},
				Annotations: map[string]string{"example.com/note": "hello"}},
		}
		restCalls, grpcCalls := a.Calls.Load(), a.GRPCCalls.Load()
		r := c.postREST(t, c.rest, req)
		if r.status != http.StatusOK || r.proto != 1 {
			t.Fatalf("REST over HTTP/1.1: HTTP/%d %d %v", r.proto, r.status, r.keys)
		}
		g, err := c.grpcpb.Allocate(ctx, req)
		if err != nil {
			t.Fatalf("gRPC: %v", err)
		}
		r2 := c.postREST(t, c.rest2, req)
		if r2.status != http.StatusOK || r2.proto != 2 {
			t.Fatalf("REST over HTTP/2: HTTP/%d %d %v", r2.proto, r2.status, r2.keys)
		}
		// Each face was reached (and only it): REST twice, gRPC once, on the one address.
		if d := a.Calls.Load() - restCalls; d != 2 {
			t.Errorf("REST calls: %d, want 2", d)
		}
		if d := a.GRPCCalls.Load() - grpcCalls; d != 1 {
			t.Errorf("gRPC calls: %d, want 1", d)
		}
		names := []string{r.res.GameServerName, g.GameServerName, r2.res.GameServerName}
		if names[0] != "gs-1" || names[1] != "gs-2" || names[2] != "gs-3" {
			t.Errorf("allocated %v, want gs-1 (REST), gs-2 (gRPC), gs-3 (REST over HTTP/2): the first Ready by name each time", names)
		}
		// Field by field, the three answers are one: the same fields from twin servers.
		want := &pb.AllocationResponse{
			Address:  "10.0.0.7",
			NodeName: "node-7",
			Source:   "local",
			Ports: []*pb.AllocationResponse_GameServerStatusPort{
				{Name: "game", Port: 7001}, {Name: "query", Port: 7002}},
			Addresses: []*pb.AllocationResponse_GameServerStatusAddress{
				{Type: "InternalIP", Address: "10.0.0.7"}, {Type: "Hostname", Address: "node-7"}},
		}
		for i, res := range []*pb.AllocationResponse{r.res, g, r2.res} {
			n := normalized(t, res)
			if n.Metadata.Labels["match"] != "m-1" || n.Metadata.Labels["agones.dev/fleet"] != "arena" ||
				n.Metadata.Annotations["example.com/note"] != "hello" {
				t.Errorf("answer %d: the request's metadata is not on the server's: %v", i, n.Metadata)
			}
			md := n.Metadata
			n.Metadata = nil
			if !proto.Equal(n, want) {
				t.Errorf("answer %d (%s):\n got %v\nwant %v", i, names[i], n, want)
			}
			n.Metadata = md
			if i > 0 {
				if first := normalized(t, r.res); !proto.Equal(n, first) {
					t.Errorf("answer %d differs from the REST answer:\n%v\n%v", i, n, first)
				}
			}
		}
		// REST: protojson with EmitUnpopulated, as grpc-gateway writes agones-allocator's answer.
		for _, k := range []string{"gameServerName", "ports", "address", "addresses", "nodeName", "source", "metadata", "counters", "lists"} {
			if _, ok := r.keys[k]; !ok {
				t.Errorf("REST answer lacks %q: %v", k, r.keys)
			}
		}
		// The servers really are Allocated, with the request's metadata.
		for _, name := range names {
			gs := cp.GetGameServer(t, ns, name)
			if harness.State(gs) != "Allocated" || gs.GetLabels()["match"] != "m-1" {
				t.Errorf("%s: %s", name, harness.Describe(gs))
			}
		}
		// Nothing left: both faces say no server, the same way.
		r = c.postREST(t, c.rest, req)
		_, err = c.grpcpb.Allocate(ctx, req)
		st := status.Convert(err)
		if r.status != http.StatusTooManyRequests || r.code != int(codes.ResourceExhausted) ||
			st.Code() != codes.ResourceExhausted || st.Message() != r.message {
			t.Errorf("no server: REST %d code %d %q, gRPC %v", r.status, r.code, r.message, err)
		}
	})

	t.Run("SameErrors", func(t *testing.T) {
		ns := cp.Namespace(t)
		readyServer(t, cp, ns, "gs-untouched", nil)
		cases := []struct {
			name       string
			req        *pb.AllocationRequest
			httpStatus int
			code       codes.Code
		}{
			// No namespace defaulting: nothing matches.
			{"NoNamespace", &pb.AllocationRequest{}, http.StatusTooManyRequests, codes.ResourceExhausted},
			// An invalid request: Agones' 422 as the gRPC code, HTTP 500 over REST.
			{"InvalidLabelKey", &pb.AllocationRequest{Namespace: ns,
				Metadata: &pb.MetaPatch{Labels: map[string]string{"bad key!": "x"}}}, http.StatusInternalServerError, 422},
			{"InvalidAnnotationKey", &pb.AllocationRequest{Namespace: ns,
				Metadata: &pb.MetaPatch{Annotations: map[string]string{"/nope": "x"}}}, http.StatusInternalServerError, 422},
			// Multi-cluster without a policy.
			{"MultiClusterNoPolicy", &pb.AllocationRequest{Namespace: ns,
				MultiClusterSetting: &pb.MultiClusterSetting{Enabled: true}}, http.StatusInternalServerError, codes.Unknown},
		}
		for _, tc := range cases {
			r := c.postREST(t, c.rest, tc.req)
			_, err := c.grpcpb.Allocate(ctx, tc.req)
			st := status.Convert(err)
			if r.status != tc.httpStatus || r.code != int(tc.code) || st.Code() != tc.code || st.Message() != r.message || r.message == "" {
				t.Errorf("%s: REST %d code %d %q; gRPC %v %q; want HTTP %d and code %d from both with one message",
					tc.name, r.status, r.code, r.message, st.Code(), st.Message(), tc.httpStatus, tc.code)
			}
			if _, ok := r.keys["details"]; !ok {
				t.Errorf("%s: REST error body without details (grpc-gateway's shape): %v", tc.name, r.keys)
			}
		}
		if gs := cp.GetGameServer(t, ns, "gs-untouched"); harness.State(gs) != "Ready" {
			t.Errorf("a refused request allocated: %s", harness.Describe(gs))
		}
		// A REST body that is not an AllocationRequest: grpc-gateway's 400, code 3.
		hr, _ := http.NewRequest(http.MethodPost, a.URL+"/gameserverallocation", bytes.NewBufferString(`{"namespace":7}`))
		res, err := c.rest.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !bytes.Contains(raw, []byte(`"code":3`)) {
			t.Errorf("malformed REST body: %d %s", res.StatusCode, raw)
		}
	})

	t.Run("RemoteSource", func(t *testing.T) {
		policyNS := cp.Namespace(t)
		readyServer(t, cp, policyNS, "remote-1", nil)
		readyServer(t, cp, policyNS, "remote-2", nil)
		a.Policy.Store(&harness.MultiClusterPolicy{Namespace: policyNS, RemoteEndpoint: "remote.example.com:443"})
		defer a.Policy.Store(nil)
		req := &pb.AllocationRequest{Namespace: "elsewhere", MultiClusterSetting: &pb.MultiClusterSetting{Enabled: true}}
		r := c.postREST(t, c.rest, req)
		g, err := c.grpcpb.Allocate(ctx, req)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("REST %d %v; gRPC %v", r.status, r.keys, err)
		}
		if r.res.Source != "remote.example.com:443" || g.Source != r.res.Source {
			t.Errorf("source: REST %q, gRPC %q", r.res.Source, g.Source)
		}
		if r.res.GameServerName != "remote-1" || g.GameServerName != "remote-2" {
			t.Errorf("allocated %s and %s in the policy's namespace, want remote-1 and remote-2", r.res.GameServerName, g.GameServerName)
		}
	})

	t.Run("GRPCNeedsClientCertificate", func(t *testing.T) {
		tlsc := harness.ClientTLS(t, a.CAFile, a.ClientCert, a.ClientKey)
		tlsc.Certificates = nil
		conn, err := grpc.NewClient(a.Addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsc)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		before := a.GRPCCalls.Load()
		_, err = pb.NewAllocationServiceClient(conn).Allocate(cctx, &pb.AllocationRequest{Namespace: "x"})
		if status.Code(err) != codes.Unavailable || a.GRPCCalls.Load() != before {
			t.Errorf("without a client certificate: want Unavailable and no call, got %v", err)
		}
	})
}
