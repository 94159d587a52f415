// gRPC on the gateway's port (issue 23 part 1): a Go client generated from the project's .proto
// (test/e2e/hack/gen-grpc), calling as Agones' examples/allocator-client does (mTLS through
// grpc.WithTransportCredentials), against the same gateway, stand-in allocator, webhook and
// resolver as the REST tests.
package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
	healthpb "github.com/agones-allocating-webhook/e2e/grpcapi/health"
	"github.com/agones-allocating-webhook/e2e/harness"
)

var (
	grpcShared *env
	grpcOnce   sync.Once
)

// setupGRPC: its own webhook+resolver, stand-in allocator and gateway (TestGateway's are stopped
// when it ends), shared by the gRPC subtests; each subtest has its own namespace.
func setupGRPC(t *testing.T) *env {
	return sharedEnv(t, &grpcOnce, &grpcShared, "gateway-grpc", "--shutdown-grace=20s")
}

// dial connects as examples/allocator-client does: TLS with the client certificate, the gateway's
// serving CA, one connection (HTTP/2 via ALPN).
func (e *env) dial(t *testing.T) *grpc.ClientConn { return e.dialTo(t, e.gw) }

// dialTo connects to the gateway replica gw the same way.
func (e *env) dialTo(t *testing.T, gw *harness.Webhook) *grpc.ClientConn {
	t.Helper()
	crt, key := e.clientCA.Issue(t, "grpc-director", "director", false)
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.Port),
		grpc.WithTransportCredentials(credentials.NewTLS(harness.ClientTLS(t, gw.CAFile, crt, key))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

type grpcAnswer struct {
	res  *pb.AllocationResponse
	err  error
	took time.Duration
}

func allocateGRPC(ctx context.Context, conn *grpc.ClientConn, ns string) <-chan grpcAnswer {
	ch := make(chan grpcAnswer, 1)
	go func() {
		start := time.Now()
		res, err := pb.NewAllocationServiceClient(conn).Allocate(ctx, &pb.AllocationRequest{Namespace: ns})
		ch <- grpcAnswer{res, err, time.Since(start)}
	}()
	return ch
}

func receiveGRPC(t *testing.T, ch <-chan grpcAnswer, timeout time.Duration) grpcAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(timeout):
		t.Fatalf("no gRPC answer within %v", timeout)
		return grpcAnswer{}
	}
}

func TestGatewayGRPC(t *testing.T) {
	setupGRPC(t)
	t.Run("ConfirmedOverGRPC", testGRPCConfirmed)
	t.Run("NoServerResourceExhausted", testGRPCNoServer)
	t.Run("DeadlineFromGrpcTimeout", testGRPCDeadline)
	t.Run("CancelNoticed", testGRPCCancel)
	t.Run("UnknownMethodUnimplemented", testGRPCUnknownMethod)
	t.Run("InvalidUTF8InvalidArgument", testGRPCInvalidUTF8)
	t.Run("RESTAndGRPCOnOnePort", testRESTAndGRPCTogether)
	t.Run("RESTOverHTTP2", testRESTOverHTTP2)
	t.Run("IdempotentRetryOverGRPC", testGRPCIdempotentRetry)
	t.Run("IdempotentRetryToAnotherReplicaAfterSIGKILL", testGRPCIdempotentRetryAfterKill)
	// Last: it stops the gateway.
	t.Run("HealthServingThenNotServingOnSIGTERM", testGRPCHealthDrain)
}

// The answer comes only after the resolver promoted the server (it is Allocated by then).
func testGRPCConfirmed(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	e.readyGameServer(t, "gs-a", true, harness.TimeoutKey, "20s")
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 30*time.Second)
	defer cancel()
	ch := allocateGRPC(ctx, conn, e.ns)
	e.waitState(t, "gs-a", "Allocating", 10*time.Second)
	select {
	case a := <-ch:
		t.Fatalf("answered before the server was playable: %v %v", a.res, a.err)
	case <-time.After(time.Second):
	}
	id := e.confirm(t, "gs-a")
	a := receiveGRPC(t, ch, 15*time.Second)
	if a.err != nil {
		t.Fatalf("Allocate: %v\n%s", a.err, e.gw.LogTail(20))
	}
	if a.res.GameServerName != "gs-a" || a.res.Source != "local" {
		t.Errorf("response: %v", a.res)
	}
	if got := a.res.GetMetadata().GetAnnotations()[harness.ConfirmedKey]; got != id {
		t.Errorf("response metadata: confirmed=%q, want %q (%v)", got, id, a.res.GetMetadata())
	}
	if gs := e.cp.GetGameServer(t, e.ns, "gs-a"); harness.State(gs) != "Allocated" {
		t.Errorf("answered while the server is %s", harness.State(gs))
	}
}

func testGRPCNoServer(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 30*time.Second)
	defer cancel()
	a := receiveGRPC(t, allocateGRPC(ctx, conn, e.ns), 30*time.Second)
	if status.Code(a.err) != codes.ResourceExhausted {
		t.Fatalf("want ResourceExhausted, got %v", a.err)
	}
}

// The call's deadline (grpc-timeout) is the gateway's: it answers ResourceExhausted (as REST
// answers 429) shortly before the client's own deadline, never DeadlineExceeded from the client.
func testGRPCDeadline(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	e.readyGameServer(t, "gs-slow", true, harness.TimeoutKey, "20s")
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 3*time.Second)
	defer cancel()
	a := receiveGRPC(t, allocateGRPC(ctx, conn, e.ns), 10*time.Second)
	if status.Code(a.err) != codes.ResourceExhausted {
		t.Fatalf("want ResourceExhausted from the gateway, got %v after %v", a.err, a.took)
	}
	if a.took < 2500*time.Millisecond || a.took > 3*time.Second {
		t.Errorf("answered after %v, want within the last 5%% of the 3s deadline", a.took)
	}
	t.Logf("%v after %v", a.err, a.took)
}

// Cancelling the call resets the stream: the gateway's wait ends at once and is counted.
func testGRPCCancel(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	e.readyGameServer(t, "gs-left", true, harness.TimeoutKey, "20s")
	before := metric(t, e.gw, `allocating_gateway_abandoned_total{phase="waiting"}`)
	ctx, cancel := context.WithCancel(harness.Ctx(t))
	ch := allocateGRPC(ctx, conn, e.ns)
	e.waitState(t, "gs-left", "Allocating", 10*time.Second)
	if metric(t, e.gw, "allocating_gateway_waiting ") < 1 {
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	cancelled := time.Now()
	if a := receiveGRPC(t, ch, 5*time.Second); status.Code(a.err) != codes.Canceled {
		t.Fatalf("want Canceled, got %v", a.err)
	}
	if !harness.Poll(3*time.Second, 20*time.Millisecond, func() bool {
		return metric(t, e.gw, `allocating_gateway_abandoned_total{phase="waiting"}`) == before+1
	}) {
		t.Fatalf("cancellation not counted as abandoned:\n%s", e.gw.LogTail(30))
	}
	t.Logf("noticed within %v of the cancel", time.Since(cancelled))
	took := e.released(t, "gs-left", cancelled, 10*time.Second)
	t.Logf("released %v after the cancel", took)
}

// A cancelled call with an idempotency key (gRPC metadata x-allocating-idempotency-key) leaves its
// server for the retry: the retry with the key waits on it and gets it, with one allocation.
func testGRPCIdempotentRetry(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	e.readyGameServer(t, "gs-k", true, harness.TimeoutKey, "20s")
	e.readyGameServer(t, "gs-k2", true, harness.TimeoutKey, "20s")
	calls := e.alloc.Calls.Load()
	md := metadata.Pairs(strings.ToLower(harness.IdempotencyHeader), "grpc-"+e.ns)
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(harness.Ctx(t), md))
	ch := allocateGRPC(ctx, conn, e.ns)
	e.waitState(t, "gs-k", "Allocating", 10*time.Second)
	cancel()
	receiveGRPC(t, ch, 5*time.Second)
	e.retryGetsTheSameServer(t, conn, md, "gs-k", "gs-k2", calls)
}

// retryGetsTheSameServer: a retry with the key in `md` on `conn`, made while `held` waits for its
// confirmation, is answered with `held` once it is confirmed; the allocator was called once since
// `calls` and `spare` (the other Ready server) was never allocated.
func (e *env) retryGetsTheSameServer(t *testing.T, conn *grpc.ClientConn, md metadata.MD, held, spare string, calls int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(harness.Ctx(t), md), 15*time.Second)
	defer cancel()
	retry := allocateGRPC(ctx, conn, e.ns)
	time.Sleep(time.Second)
	e.confirm(t, held)
	a := receiveGRPC(t, retry, 10*time.Second)
	if a.err != nil || a.res.GameServerName != held {
		t.Fatalf("retry with the key: want %s, got %v %v\n%s", held, a.res, a.err, e.gw.LogTail(20))
	}
	if n := e.alloc.Calls.Load() - calls; n != 1 {
		t.Errorf("want 1 allocator call for the key, got %d", n)
	}
	if s := harness.State(e.cp.GetGameServer(t, e.ns, spare)); s != "Ready" {
		t.Errorf("a second server was allocated for the key: %s is %s", spare, s)
	}
}

func testGRPCUnknownMethod(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	err := conn.Invoke(harness.Ctx(t), "/allocation.AllocationService/Nope", &pb.AllocationRequest{}, &pb.AllocationResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("want Unimplemented, got %v", err)
	}
	_, err = healthpb.NewHealthClient(conn).Check(harness.Ctx(t), &healthpb.HealthCheckRequest{Service: "other"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("health of an unknown service: want NotFound, got %v", err)
	}
}

// rawCodec sends and receives messages as the bytes given: a request no generated client would send.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// A namespace that is not UTF-8 (issue 35): InvalidArgument naming the field, from a real gRPC client;
// libprotobuf's own line never reaches the gateway's stderr as "[libprotobuf ERROR ...]".
func testGRPCInvalidUTF8(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	req := []byte{0x0a, 0x02, 0xff, 0xfe} // field 1 (namespace), 2 bytes, not UTF-8
	for i := 0; i < 20; i++ {
		var out []byte
		err := conn.Invoke(harness.Ctx(t), "/allocation.AllocationService/Allocate", &req, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "allocation.AllocationRequest.namespace") {
			t.Fatalf("want InvalidArgument naming the namespace field, got %v", err)
		}
	}
	if strings.Contains(e.gw.Logs(), "[libprotobuf") {
		t.Fatalf("libprotobuf wrote to stderr itself:\n%s", e.gw.LogTail(20))
	}
}

// A REST request and a gRPC call wait on the same port at once; both are answered.
func testRESTAndGRPCTogether(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	e.readyGameServer(t, "gs-1", true, harness.TimeoutKey, "20s")
	e.readyGameServer(t, "gs-2", true, harness.TimeoutKey, "20s")
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 30*time.Second)
	defer cancel()
	g := allocateGRPC(ctx, conn, e.ns)
	r := e.allocateAsync(t)
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		return harness.State(e.cp.GetGameServer(t, e.ns, "gs-1")) == "Allocating" &&
			harness.State(e.cp.GetGameServer(t, e.ns, "gs-2")) == "Allocating"
	}) {
		t.Fatalf("both servers should be Allocating:\n%s", e.gw.LogTail(20))
	}
	e.confirm(t, "gs-1")
	e.confirm(t, "gs-2")
	ga := receiveGRPC(t, g, 15*time.Second)
	ra := receive(t, r, 15*time.Second)
	if ga.err != nil || ra.status != 200 {
		t.Fatalf("gRPC %v / REST %s", ga.err, ra)
	}
	if ga.res.GameServerName == ra.body["gameServerName"] {
		t.Errorf("both got %s", ga.res.GameServerName)
	}
}

// SERVING while running; after SIGTERM, on a connection that still has a call waiting (a
// connection with no stream open gets GOAWAY and closes), NOT_SERVING; the waiting call is still
// answered.
func testGRPCHealthDrain(t *testing.T) {
	e := setupGRPC(t)
	conn := e.dial(t)
	health := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "allocation.AllocationService"} {
		res, err := health.Check(harness.Ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q): %v %v", svc, res, err)
		}
	}
	// Watch is not served (documented): the stream's first Recv says so.
	if w, err := health.Watch(harness.Ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("Watch: %v", err)
	} else if _, err := w.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("Watch: want Unimplemented, got %v", err)
	}
	e.readyGameServer(t, "gs-drain", true, harness.TimeoutKey, "25s")
	ctx, cancel := context.WithTimeout(harness.Ctx(t), 40*time.Second)
	defer cancel()
	ch := allocateGRPC(ctx, conn, e.ns)
	e.waitState(t, "gs-drain", "Allocating", 10*time.Second)
	if err := e.gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !harness.Poll(5*time.Second, 50*time.Millisecond, func() bool {
		res, err := health.Check(harness.Ctx(t), &healthpb.HealthCheckRequest{})
		return err == nil && res.Status == healthpb.HealthCheckResponse_NOT_SERVING
	}) {
		res, err := health.Check(harness.Ctx(t), &healthpb.HealthCheckRequest{})
		t.Fatalf("after SIGTERM: want NOT_SERVING, got %v %v\n%s", res, err, e.gw.LogTail(20))
	}
	_, err := pb.NewAllocationServiceClient(conn).Allocate(harness.Ctx(t), &pb.AllocationRequest{Namespace: e.ns})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a new call while draining: want Unavailable, got %v", err)
	}
	id := e.confirm(t, "gs-drain")
	a := receiveGRPC(t, ch, 15*time.Second)
	if a.err != nil || a.res.GameServerName != "gs-drain" || a.res.GetMetadata().GetAnnotations()[harness.ConfirmedKey] != id {
		t.Fatalf("the waiting call was not answered during the grace period: %v %v\n%s", a.res, a.err, e.gw.LogTail(30))
	}
	if err, ok := e.gw.Wait(10 * time.Second); !ok || e.gw.ExitCode() != 0 {
		t.Errorf("gateway after SIGTERM: exit %d, %v (exited: %v)", e.gw.ExitCode(), err, ok)
	}
}

// A REST client that negotiates HTTP/2 (as curl does by default) is served the same REST answers.
func testRESTOverHTTP2(t *testing.T) {
	e := setupGRPC(t)
	crt, key := e.clientCA.Issue(t, "h2-director", "director", false)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: harness.ClientTLS(t, e.servingCA, crt, key), ForceAttemptHTTP2: true}}
	req, _ := http.NewRequest(http.MethodPost, e.gw.URL("/gameserverallocation"),
		strings.NewReader(fmt.Sprintf(`{"namespace":%q}`, e.ns)))
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.ProtoMajor != 2 {
		t.Errorf("negotiated %s, want HTTP/2", res.Proto)
	}
	if res.StatusCode != 429 || !strings.Contains(string(body), `"code":8`) {
		t.Errorf("no server over HTTP/2: want 429 code 8, got %d %s", res.StatusCode, body)
	}
	e.readyGameServer(t, "gs-h2", true, harness.TimeoutKey, "20s")
	ch := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.gw.URL("/gameserverallocation"),
			strings.NewReader(fmt.Sprintf(`{"namespace":%q}`, e.ns)))
		req.Header.Set("Content-Type", "application/json")
		r, err := c.Do(req)
		if err != nil {
			t.Errorf("POST over HTTP/2: %v", err)
			r = nil
		}
		ch <- r
	}()
	e.waitState(t, "gs-h2", "Allocating", 10*time.Second)
	e.confirm(t, "gs-h2")
	select {
	case r := <-ch:
		if r == nil {
			t.Fatal("no answer")
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 || !strings.Contains(string(b), `"gameServerName":"gs-h2"`) {
			t.Fatalf("want 200 for gs-h2, got %d %s", r.StatusCode, b)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer over HTTP/2 within 15s")
	}
}

// As Agones' allocator-client calls, with the key in the metadata: the replica serving the first
// call is SIGKILLed while it waits; the retry with the key to the other replica waits on the same
// server and gets it once confirmed, with one allocation in all.
func testGRPCIdempotentRetryAfterKill(t *testing.T) {
	e := setupGRPC(t)
	e.readyGameServer(t, "gs-kk", true, harness.TimeoutKey, "30s")
	e.readyGameServer(t, "gs-kk2", true, harness.TimeoutKey, "30s")
	gw, _ := e.extraGateway(t, "gw-grpc-killed")
	first := e.dialTo(t, gw)
	calls := e.alloc.Calls.Load()
	md := metadata.Pairs(strings.ToLower(harness.IdempotencyHeader), "kill-"+e.ns)
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(harness.Ctx(t), md), 20*time.Second)
	defer cancel()
	ch := allocateGRPC(ctx, first, e.ns)
	e.waitState(t, "gs-kk", "Allocating", 10*time.Second)
	gw.Kill()
	if a := receiveGRPC(t, ch, 5*time.Second); a.err == nil {
		t.Fatalf("the killed replica answered: %v", a.res)
	}
	e.retryGetsTheSameServer(t, e.dial(t), md, "gs-kk", "gs-kk2", calls) // to the other replica
}
