// Package quilkin runs the real Quilkin (issue 37; built from its crate by build-quilkin, run by
// `scripts/test --only quilkin`) in front of gated game servers, deployed as docs/quilkin.md says:
// a management server with the Agones provider serving xDS, a proxy fed by it, and the filter chain
// (Capture the last 3 bytes, TokenRouter) from a ConfigMap labelled quilkin.dev/configmap=true. The
// project's webhook + resolver, the stand-in agones-allocator and the allocation gateway run on the
// package's kube-apiserver (harness.StartGatewayStack). The game server is a UDP counter in this
// process; the player sends from a non-loopback address of this host (a release build of Quilkin
// drops packets from loopback sources). Every check counts packets at the game server.
//
// Skipped (passing) unless AW_QUILKIN_BIN names the quilkin binary (test/e2e/quilkin/run sets it).
package quilkin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

// TokensKey is where Quilkin's Agones provider reads a GameServer's routing tokens (standard
// base64, comma-separated).
const TokensKey = "quilkin.dev/tokens"

// filterChain is the ConfigMap's quilkin.yaml: the token is the last 3 bytes of each packet,
// removed before the packet is forwarded to the game server that holds it.
const filterChain = `version: v1alpha1
filters:
  - name: quilkin.filters.capture.v1alpha1.Capture
    config:
      metadataKey: quilkin.dev/capture
      suffix:
        size: 3
        remove: true
  - name: quilkin.filters.token_router.v1alpha1.TokenRouter
    config:
      metadataKey: quilkin.dev/capture
`

func TestMain(m *testing.M) {
	if quilkinBin() == "" {
		fmt.Println("quilkin: skipped: the real Quilkin is not built (AW_QUILKIN_BIN unset); " +
			"run scripts/test --only quilkin (builds it from its crate; docs/quilkin.md)")
		os.Exit(0)
	}
	harness.Main(m)
}

func quilkinBin() string { return os.Getenv("AW_QUILKIN_BIN") }

type env struct {
	cp    *harness.ControlPlane
	stack *harness.GatewayStack
	ns    string
	sdk   *harness.SDK
	proxy *net.UDPAddr // where players send (the proxy's UDP port on the player's address)
	ip    net.IP       // the player's (non-loopback) address
}

// shared: the gate (webhook + resolver), the stand-in allocator and the gateway, started by
// TestQuilkin for all its subtests.
var shared *harness.GatewayStack

// setup: for each test its own namespace, SDK identity and Quilkin pair watching that namespace.
func setup(t *testing.T) *env {
	t.Helper()
	ip := playerIP(t)
	cp := harness.Setup(t)
	if shared == nil {
		t.Fatal("the gateway stack is not running (TestQuilkin starts it)")
	}
	e := &env{cp: cp, stack: shared, ns: cp.Namespace(t), ip: ip}
	e.sdk = cp.SDK(t, e.ns)
	e.startQuilkin(t)
	return e
}

// playerIP: AW_QUILKIN_PLAYER_IP, else the first IPv4 address of an up, non-loopback interface.
func playerIP(t *testing.T) net.IP {
	t.Helper()
	if s := os.Getenv("AW_QUILKIN_PLAYER_IP"); s != "" {
		ip := net.ParseIP(s)
		if ip == nil || ip.IsLoopback() {
			t.Fatalf("AW_QUILKIN_PLAYER_IP=%q: want a non-loopback IP address of this host", s)
		}
		return ip
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
				return n.IP.To4()
			}
		}
	}
	t.Fatal("no non-loopback IPv4 address on this host for the player (a release build of Quilkin drops " +
		"packets from loopback sources); set AW_QUILKIN_PLAYER_IP")
	return nil
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// startQuilkin applies the filter ConfigMap and starts, as the harness starts its own processes
// (log under cp.Dir/webhooks, printed when the test fails, SIGTERM at the end), a management
// server (Agones provider + ConfigMap filters, serving xDS; the control plane's admin kubeconfig)
// and a proxy fed by it. It returns when the proxy is ready (its xDS stream is up).
func (e *env) startQuilkin(t *testing.T) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "quilkin-filters", Labels: map[string]string{"quilkin.dev/configmap": "true"}},
		Data:       map[string]string{"quilkin.yaml": filterChain},
	}
	if _, err := e.cp.Clientset(t, harness.Admin).CoreV1().ConfigMaps(e.ns).Create(harness.Ctx(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("filter ConfigMap: %v", err)
	}
	noDefaults := []string{"bind-address", "port", "health-port", "tls-cert-file", "tls-key-file",
		"trusted-users", "agones-controller-users", "log-format"}
	env := []string{"KUBECONFIG=" + e.cp.Kubeconfig, "RUST_LOG=info,quilkin=debug", "NO_COLOR=1"}
	start := func(name string, args ...string) *harness.Webhook {
		admin := harness.FreePort(t)
		args = append(args, "--admin.address=127.0.0.1:"+strconv.Itoa(admin),
			"--service.qcmp.port="+strconv.Itoa(freeUDPPort(t)),
			"--service.phoenix.port="+strconv.Itoa(harness.FreePort(t)))
		return e.cp.StartWebhook(t, harness.WebhookOptions{Name: name, Binary: quilkinBin(), Args: args,
			Env: env, HealthPort: admin, Wait: "readyz", NoDefaults: noDefaults})
	}
	xds := harness.FreePort(t)
	start("quilkin-manage",
		"--service.xds", "--service.xds.port="+strconv.Itoa(xds),
		"--provider.k8s", "--provider.k8s.namespace="+e.ns,
		"--provider.k8s.agones", "--provider.k8s.agones.namespaces="+e.ns)
	udp := freeUDPPort(t)
	start("quilkin-proxy",
		"--service.udp", "--service.udp.port="+strconv.Itoa(udp),
		"--provider.xds.endpoints=http://127.0.0.1:"+strconv.Itoa(xds))
	e.proxy = &net.UDPAddr{IP: e.ip, Port: udp}
}

// gameServer is the game server's UDP socket: it records every packet it receives (the payload
// without the token, which the Capture filter removed) and when.
type gameServer struct {
	conn *net.UDPConn
	mu   sync.Mutex
	got  []delivery
}

type delivery struct {
	at   time.Time
	body string
}

func newGameServer(t *testing.T) *gameServer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	g := &gameServer{conn: c}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			g.mu.Lock()
			g.got = append(g.got, delivery{at: time.Now(), body: string(buf[:n])})
			g.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close() })
	return g
}

func (g *gameServer) port() int { return g.conn.LocalAddr().(*net.UDPAddr).Port }

// received: the deliveries whose body starts with prefix.
func (g *gameServer) received(prefix string) []delivery {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []delivery
	for _, d := range g.got {
		if strings.HasPrefix(d.body, prefix) {
			out = append(out, d)
		}
	}
	return out
}

// first waits up to timeout for a delivery whose body starts with prefix.
func (g *gameServer) first(prefix string, timeout time.Duration) (delivery, bool) {
	var d delivery
	ok := harness.Poll(timeout, 2*time.Millisecond, func() bool {
		got := g.received(prefix)
		if len(got) > 0 {
			d = got[0]
		}
		return len(got) > 0
	})
	return d, ok
}

// player sends packets "<label>-<seq>" + token to the proxy from the player's address, and
// remembers when it sent each.
type player struct {
	conn  *net.UDPConn
	to    *net.UDPAddr
	mu    sync.Mutex
	sent  map[string]time.Time
	count atomic.Int64
}

func (e *env) newPlayer(t *testing.T) *player {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: e.ip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &player{conn: c, to: e.proxy, sent: map[string]time.Time{}}
}

// send sends one packet and returns its body (what the game server receives).
func (p *player) send(t *testing.T, label string, token []byte) string {
	t.Helper()
	body := fmt.Sprintf("%s-%d", label, p.count.Add(1))
	p.mu.Lock()
	p.sent[body] = time.Now()
	p.mu.Unlock()
	if _, err := p.conn.WriteToUDP(append([]byte(body), token...), p.to); err != nil {
		t.Fatalf("player send: %v", err)
	}
	return body
}

// sentBefore: the packets sent before t (body -> when).
func (p *player) sentBefore(t time.Time) map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for b, at := range p.sent {
		if at.Before(t) {
			out[b] = at
		}
	}
	return out
}

func (p *player) sentAt(body string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[body]
}

// stream sends label packets every interval until the returned stop is called; stop returns how
// many it sent.
func (p *player) stream(t *testing.T, label string, token []byte, interval time.Duration) (stop func() int) {
	done := make(chan struct{})
	finished := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			body := fmt.Sprintf("%s-%d", label, p.count.Add(1))
			p.mu.Lock()
			p.sent[body] = time.Now()
			p.mu.Unlock()
			if _, err := p.conn.WriteToUDP(append([]byte(body), token...), p.to); err == nil {
				n++
			}
			select {
			case <-done:
				finished <- n
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	n := 0
	stop = func() int {
		once.Do(func() { close(done); n = <-finished })
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}

// readyGameServer creates a GameServer (opted in or not) as Agones makes one (the spec with Agones'
// defaults, status with node name and addresses: Quilkin decodes these fields) and moves it to
// Ready (harness.CreateReady), then points status.ports at the game server's socket.
func (e *env) readyGameServer(t *testing.T, name string, g *gameServer, optIn bool, annotations ...string) {
	t.Helper()
	gs := harness.NewGameServer(name, optIn, annotations...)
	spec := gs.Object["spec"].(map[string]interface{})
	spec["scheduling"] = "Packed"
	spec["health"] = map[string]interface{}{"disabled": false, "periodSeconds": int64(5), "failureThreshold": int64(3),
		"initialDelaySeconds": int64(5)}
	spec["sdkServer"] = map[string]interface{}{"logLevel": "Info", "grpcPort": int64(9357), "httpPort": int64(9358)}
	gs.Object["status"] = map[string]interface{}{
		"state": "Creating", "nodeName": "node-1", "address": "127.0.0.1",
		"addresses": []interface{}{map[string]interface{}{"type": "InternalIP", "address": "127.0.0.1"}},
	}
	c := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns)
	ready, err := harness.CreateReady(harness.Ctx(t), e.cp.Dynamic(t, harness.Admin), e.ns, gs)
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(ready.Object, []interface{}{
		map[string]interface{}{"name": "default", "port": int64(g.port())},
	}, "status", "ports")
	if _, err := c.Update(harness.Ctx(t), ready, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status.ports of %s: %v", name, err)
	}
}

// watchStates records, from a watch on the GameServer, when each state was first seen.
func (e *env) watchStates(t *testing.T, name string) func(state string) (time.Time, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	seen := map[string]time.Time{}
	c := e.cp.Dynamic(t, harness.Admin).Resource(harness.GameServerGVR).Namespace(e.ns)
	w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatalf("watch %s: %v", name, err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				now := time.Now()
				mu.Lock()
				if s := harness.State(u); s != "" {
					if _, ok := seen[s]; !ok {
						seen[s] = now
					}
				}
				mu.Unlock()
			}
		}
	}()
	return func(state string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := seen[state]
		return at, ok
	}
}

func (e *env) waitState(t *testing.T, name, state string, timeout time.Duration) {
	t.Helper()
	e.cp.WaitForState(t, e.ns, name, state, timeout)
}

// allocate is agones-allocator's write (the stand-in's full UPDATE as Agones' allocator) with the
// match's token in the allocation metadata; the gate turns it into Allocating.
func (e *env) allocate(t *testing.T, name string, token []byte) {
	t.Helper()
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesAllocator), e.ns, name, nil,
		map[string]string{TokensKey: base64.StdEncoding.EncodeToString(token)})
	if err != nil {
		t.Fatalf("allocate %s: %v", name, err)
	}
	if s := harness.State(got); s != "Allocating" {
		t.Fatalf("allocate %s: the gate should hold it in Allocating, got %s", name, harness.Describe(got))
	}
}

func (e *env) confirm(t *testing.T, name string) {
	t.Helper()
	if _, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, name); err != nil {
		t.Fatalf("confirm %s: %v", name, err)
	}
}

// backToReady: the match ends; the game server calls SDK Ready() (RequestReady) and Agones'
// controller moves it to Ready (as the resolver's scenario tests do).
func (e *env) backToReady(t *testing.T, name string) {
	t.Helper()
	if _, err := e.sdk.SetState(harness.Ctx(t), name, "RequestReady"); err != nil {
		t.Fatalf("SDK Ready(): %v", err)
	}
	c := e.cp.Dynamic(t, harness.AgonesController).Resource(harness.GameServerGVR).Namespace(e.ns)
	cur := e.cp.GetGameServer(t, e.ns, name)
	_ = unstructured.SetNestedField(cur.Object, "Ready", "status", "state")
	if _, err := c.Update(harness.Ctx(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("controller RequestReady -> Ready: %v", err)
	}
	e.waitState(t, name, "Ready", 5*time.Second)
}

// noneDelivered fails when any packet labelled label reached the game server.
func noneDelivered(t *testing.T, g *gameServer, label string, sent int, while string) {
	t.Helper()
	if got := g.received(label + "-"); len(got) > 0 {
		t.Errorf("%d of %d packets reached the game server while %s (first %q at %s)", len(got), sent, while,
			got[0].body, got[0].at.Format(time.RFC3339Nano))
	} else {
		t.Logf("0 of %d packets delivered while %s", sent, while)
	}
}

// allFlow sends n packets labelled label, 10 ms apart, and fails unless every one is delivered.
func allFlow(t *testing.T, g *gameServer, p *player, label string, token []byte, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		p.send(t, label, token)
		time.Sleep(10 * time.Millisecond)
	}
	if !harness.Poll(2*time.Second, 10*time.Millisecond, func() bool { return len(g.received(label+"-")) >= n }) {
		t.Errorf("%d of %d packets delivered once Allocated", len(g.received(label+"-")), n)
	}
}

// One parent test owns the shared processes; each subtest has its own namespace and Quilkin.
func TestQuilkin(t *testing.T) {
	playerIP(t)
	shared = harness.Setup(t).StartGatewayStack(t, "quilkin")
	defer func() { shared = nil }()
	t.Run("HeldUntilConfirmed", testHeldUntilConfirmed)
	t.Run("ThroughTheGateway", testThroughTheGateway)
	t.Run("TimedOutNeverRouted", testTimedOutNeverRouted)
	t.Run("SecondMatchNewTokenOnlyOnceConfirmed", testSecondMatch)
	t.Run("NotGatedRoutedAtOnce", testNotGated)
}

// 1. A gated server with the match's token in its allocation metadata: no packet while it is
// Allocating; every packet once it is Allocated; the delay from Allocated to the first delivery.
func testHeldUntilConfirmed(t *testing.T) {
	e := setup(t)
	g := newGameServer(t)
	e.readyGameServer(t, "gs-1", g, true, harness.TimeoutKey, "60s")
	states := e.watchStates(t, "gs-1")
	p := e.newPlayer(t)
	token := []byte("abc")

	stop := p.stream(t, "ready", token, 20*time.Millisecond)
	time.Sleep(time.Second)
	noneDelivered(t, g, "ready", stop(), "Ready (no token yet)")

	e.allocate(t, "gs-1", token)
	stop = p.stream(t, "held", token, 10*time.Millisecond)
	time.Sleep(3 * time.Second)
	held := stop()
	noneDelivered(t, g, "held", held, "Allocating")

	// Sending on while the game server confirms: no packet sent before the confirmation may arrive.
	stop = p.stream(t, "live", token, 5*time.Millisecond)
	confirmAt := time.Now()
	e.confirm(t, "gs-1")
	d, ok := g.first("live-", 15*time.Second)
	stop()
	if !ok {
		t.Fatalf("no packet delivered within 15s of the confirmation (state %s)", harness.State(e.cp.GetGameServer(t, e.ns, "gs-1")))
	}
	allocatedAt, seen := states("Allocated")
	if !seen {
		t.Fatalf("a packet was delivered (%s) but the GameServer was never seen Allocated", d.body)
	}
	if sent := p.sentAt(d.body); sent.Before(confirmAt) {
		t.Errorf("packet %s sent before the confirmation was delivered", d.body)
	}
	noneDelivered(t, g, "held", held, "Allocating (checked again after the promotion)")
	t.Logf("Allocated %v after the confirmation; first packet delivered %v after Allocated (sent %v after it)",
		allocatedAt.Sub(confirmAt).Round(time.Millisecond), d.at.Sub(allocatedAt).Round(time.Millisecond),
		p.sentAt(d.body).Sub(allocatedAt).Round(time.Millisecond))
	allFlow(t, g, p, "after", token, 50)
}

// 2. The same through the allocation gateway (REST): it answers once the server is Allocated; is
// the first packet sent right after the answer delivered?
func testThroughTheGateway(t *testing.T) {
	e := setup(t)
	g := newGameServer(t)
	e.readyGameServer(t, "gs-gw", g, true, harness.TimeoutKey, "60s")
	p := e.newPlayer(t)
	token := []byte("gw1")

	type answer struct {
		status int
		raw    string
		at     time.Time
		err    error
	}
	ch := make(chan answer, 1)
	go func() {
		body := fmt.Sprintf(`{"namespace":%q,"metadata":{"annotations":{%q:%q}}}`, e.ns, TokensKey,
			base64.StdEncoding.EncodeToString(token))
		res, err := e.stack.Client.Post(e.stack.Gateway.URL("/gameserverallocation"), "application/json",
			bytes.NewBufferString(body))
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		ch <- answer{status: res.StatusCode, raw: string(raw), at: time.Now()}
	}()
	var early *answer
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		select {
		case a := <-ch:
			early = &a
			return true
		default:
		}
		return harness.State(e.cp.GetGameServer(t, e.ns, "gs-gw")) == "Allocating"
	}) || early != nil {
		if early != nil {
			t.Fatalf("the gateway answered before the server was Allocating: %d %s %v", early.status, early.raw, early.err)
		}
		t.Fatalf("gs-gw not Allocating within 10s: %s", harness.Describe(e.cp.GetGameServer(t, e.ns, "gs-gw")))
	}
	stop := p.stream(t, "held", token, 10*time.Millisecond)
	time.Sleep(2 * time.Second)
	held := stop()
	select {
	case a := <-ch:
		t.Fatalf("the gateway answered while the server is Allocating: %d %s %v", a.status, a.raw, a.err)
	default:
	}
	noneDelivered(t, g, "held", held, "Allocating (the gateway's request pending)")

	e.confirm(t, "gs-gw")
	var a answer
	select {
	case a = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no answer from the gateway within 20s of the confirmation")
	}
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("gateway: %d %s %v", a.status, a.raw, a.err)
	}
	var resp struct {
		GameServerName string `json:"gameServerName"`
	}
	_ = json.Unmarshal([]byte(a.raw), &resp)
	if resp.GameServerName != "gs-gw" {
		t.Fatalf("gateway answered %s", a.raw)
	}
	// The player's first packet, sent as soon as the matchmaker has the answer, then one every 5 ms:
	// is the first delivered, and if not, how long after the answer was the first delivered one sent?
	firstBody := p.send(t, "first", token)
	stop = p.stream(t, "then", token, 5*time.Millisecond)
	_, ok := g.first("then-", 10*time.Second)
	stop()
	if !ok && len(g.received(firstBody)) == 0 {
		t.Fatalf("no packet delivered within 10s of the gateway's answer")
	}
	if len(g.received(firstBody)) > 0 {
		t.Logf("the first packet sent right after the gateway's answer was delivered")
	} else {
		d, _ := g.first("then-", 0)
		lost := 1 // the "first" packet
		for body, at := range p.sentBefore(p.sentAt(d.body)) {
			if strings.HasPrefix(body, "then-") && at.After(a.at) {
				lost++
			}
		}
		t.Logf("FINDING: the first packet sent right after the gateway's answer was NOT delivered: packets were "+
			"routed from %v after the answer on (%d sent before that were dropped)",
			p.sentAt(d.body).Sub(a.at).Round(time.Millisecond), lost)
	}
	noneDelivered(t, g, "held", held, "Allocating (checked again after the answer)")
	allFlow(t, g, p, "after", token, 50)
}

// 3. A server whose game never confirms times out to Unhealthy (on-timeout: Unhealthy): its token
// is never routed, neither while Allocating nor after.
func testTimedOutNeverRouted(t *testing.T) {
	e := setup(t)
	g := newGameServer(t)
	e.readyGameServer(t, "gs-late", g, true, harness.TimeoutKey, "2s", harness.OnTimeoutKey, "Unhealthy")
	p := e.newPlayer(t)
	token := []byte("tmo")
	e.allocate(t, "gs-late", token)
	stop := p.stream(t, "late", token, 10*time.Millisecond)
	e.waitState(t, "gs-late", "Unhealthy", 15*time.Second)
	time.Sleep(3 * time.Second)
	noneDelivered(t, g, "late", stop(), "Allocating then Unhealthy (timed out)")
}

// 4. A second match on the same server after it went back to Ready: the new token is routed only
// once the new allocation is confirmed.
func testSecondMatch(t *testing.T) {
	e := setup(t)
	g := newGameServer(t)
	e.readyGameServer(t, "gs-2", g, true, harness.TimeoutKey, "60s")
	p := e.newPlayer(t)
	tokenA, tokenB := []byte("AAA"), []byte("BBB")

	e.allocate(t, "gs-2", tokenA)
	e.confirm(t, "gs-2")
	e.waitState(t, "gs-2", "Allocated", 10*time.Second)
	stop := p.stream(t, "a1", tokenA, 10*time.Millisecond)
	if _, ok := g.first("a1-", 10*time.Second); !ok {
		t.Fatalf("the first match's token was never routed")
	}
	stop()

	e.backToReady(t, "gs-2")
	time.Sleep(5 * time.Millisecond) // a distinct last-allocated timestamp
	e.allocate(t, "gs-2", tokenB)
	stopB := p.stream(t, "b-held", tokenB, 10*time.Millisecond)
	stopA := p.stream(t, "a-held", tokenA, 10*time.Millisecond)
	time.Sleep(3 * time.Second)
	heldB, heldA := stopB(), stopA()
	noneDelivered(t, g, "b-held", heldB, "Allocating for the second match (its new token)")
	// What docs/quilkin.md says of the previous token (Quilkin keeps the endpoint it had).
	t.Logf("the first match's token while the second is Allocating: %d of %d delivered", len(g.received("a-held-")), heldA)

	stop = p.stream(t, "b-live", tokenB, 5*time.Millisecond)
	confirmAt := time.Now()
	e.confirm(t, "gs-2")
	d, ok := g.first("b-live-", 15*time.Second)
	stop()
	if !ok {
		t.Fatalf("the second match's token was not routed within 15s of its confirmation")
	}
	if p.sentAt(d.body).Before(confirmAt) {
		t.Errorf("packet %s sent before the confirmation was delivered", d.body)
	}
	noneDelivered(t, g, "b-held", heldB, "Allocating for the second match (checked again)")
	allFlow(t, g, p, "b-after", tokenB, 30)
	stop = p.stream(t, "a-after", tokenA, 10*time.Millisecond)
	time.Sleep(time.Second)
	t.Logf("the first match's token once the second is Allocated: %d of %d delivered", len(g.received("a-after-")), stop())
}

// The control: a server that is not opted in is routed as soon as it is allocated (what the gate
// exists to prevent), so the zero counts above are Quilkin honouring the state, not a broken path.
func testNotGated(t *testing.T) {
	e := setup(t)
	g := newGameServer(t)
	e.readyGameServer(t, "plain", g, false)
	p := e.newPlayer(t)
	token := []byte("xyz")
	got, err := harness.AllocateLikeAgones(harness.Ctx(t), e.cp.Dynamic(t, harness.AgonesAllocator), e.ns, "plain", nil,
		map[string]string{TokensKey: base64.StdEncoding.EncodeToString(token)})
	if err != nil || harness.State(got) != "Allocated" {
		t.Fatalf("allocate plain: %v %s", err, harness.Describe(got))
	}
	allocatedAt := time.Now()
	stop := p.stream(t, "plain", token, 5*time.Millisecond)
	d, ok := g.first("plain-", 15*time.Second)
	stop()
	if !ok {
		t.Fatalf("a server that is not gated was never routed: the packet path is broken, not gated")
	}
	t.Logf("not gated: first packet delivered %v after the allocation", d.at.Sub(allocatedAt).Round(time.Millisecond))
}
