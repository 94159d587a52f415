package gateway

// Issue 23's parts of the gateway, end to end: a client that goes away, deep nesting, the
// allocator's invalid-request answer, a server allocated in another namespace or by another
// cluster, a plain-HTTP allocator, client CAs from a directory, the "no server" status, the
// per-attempt allocator timeout, the connection cap, --allocator-server-name and SIGTERM.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

// metric returns the value of the first /metrics sample line starting with `prefix` (0 if none).
func metric(t *testing.T, w *harness.Webhook, prefix string) float64 {
	t.Helper()
	for _, line := range strings.Split(w.Metrics(t), "\n") {
		if strings.HasPrefix(line, prefix) || (strings.Contains(prefix, "{") && sameSample(line, prefix)) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

// sameSample: `line` is a sample of the metric and labels of `want` (name{a="x",b="y"}), whatever
// the order the exporter writes the labels in.
func sameSample(line, want string) bool {
	name, labels, _ := strings.Cut(strings.TrimSuffix(want, "}"), "{")
	if !strings.HasPrefix(line, name+"{") {
		return false
	}
	got, _, _ := strings.Cut(strings.TrimPrefix(line, name+"{"), "}")
	have := map[string]bool{}
	for _, l := range strings.Split(got, ",") {
		have[l] = true
	}
	for _, l := range strings.Split(labels, ",") {
		if !have[l] {
			return false
		}
	}
	return len(have) == len(strings.Split(labels, ","))
}

// readyIn creates an opted-in GameServer in `ns` and moves it to Ready.
func (e *env) readyIn(t *testing.T, ns, name string, annotations ...string) {
	t.Helper()
	saved := e.ns
	e.ns = ns
	defer func() { e.ns = saved }()
	e.readyGameServer(t, name, true, annotations...)
}

func (e *env) stateIn(t *testing.T, ns, name string) string {
	return harness.State(e.cp.GetGameServer(t, ns, name))
}

// A matchmaker whose own timeout is shorter than the wait gives up; the gateway notices at once
// (the connection is read while it waits), counts it and names the server in its log.
func testClientGone(t *testing.T) {
	e := setup(t)
	e.readyGameServer(t, "gs-left", true, harness.TimeoutKey, "20s")
	before := metric(t, e.gw, `allocating_gateway_abandoned_total{phase="waiting"}`)
	impatient := *e.client
	impatient.Timeout = 2 * time.Second
	_, err := e.post(t, &impatient, fmt.Sprintf(`{"namespace":%q}`, e.ns))
	gaveUp := time.Now()
	if err == nil {
		t.Fatal("the request was answered before the client's timeout")
	}
	if !harness.Poll(3*time.Second, 20*time.Millisecond, func() bool {
		return metric(t, e.gw, `allocating_gateway_abandoned_total{phase="waiting"}`) == before+1
	}) {
		t.Fatalf("abandonment not counted:\n%s", e.gw.LogTail(30))
	}
	t.Logf("noticed within %v of the client giving up", time.Since(gaveUp))
	if !strings.Contains(e.gw.Logs(), e.ns+"/gs-left") {
		t.Errorf("no log line names %s/gs-left:\n%s", e.ns, e.gw.LogTail(20))
	}
	if metric(t, e.gw, "allocating_gateway_waiting ") != 0 {
		t.Errorf("the abandoned request is still counted as waiting")
	}
	// Released (delivery_test.go): nobody will be told its address.
	e.released(t, "gs-left", gaveUp, 10*time.Second)

	// The client leaves while the allocator call is in flight (the allocator takes 2 s): reported
	// when the allocator answers, with the server it allocated for nobody.
	e.readyGameServer(t, "gs-late", true, harness.TimeoutKey, "20s")
	beforeAlloc := metric(t, e.gw, `allocating_gateway_abandoned_total{phase="allocating"}`)
	e.alloc.Delay.Store(int64(2 * time.Second))
	defer e.alloc.Delay.Store(0)
	impatient.Timeout = 500 * time.Millisecond
	if _, err := e.post(t, &impatient, fmt.Sprintf(`{"namespace":%q}`, e.ns)); err == nil {
		t.Fatal("answered before the slow allocator did")
	}
	if !harness.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		return metric(t, e.gw, `allocating_gateway_abandoned_total{phase="allocating"}`) == beforeAlloc+1
	}) {
		t.Fatalf("abandonment during the allocator call not counted:\n%s", e.gw.LogTail(30))
	}
	if !strings.Contains(e.gw.Logs(), "/gs-late") {
		t.Errorf("no log line names gs-late:\n%s", e.gw.LogTail(20))
	}
	e.released(t, "gs-late", time.Now(), 10*time.Second)
}

// A body nested deeper than 400 levels is a 400, never a crash (it was a SIGSEGV).
func testDeepNesting(t *testing.T) {
	e := setup(t)
	for _, body := range []string{strings.Repeat("[", 60000), `{"metadata":` + strings.Repeat(`{"a":`, 5000)} {
		a, err := e.post(t, e.client, body)
		if err != nil {
			t.Fatal(err)
		}
		if a.status != 400 || a.body["code"] != float64(3) || !strings.Contains(a.raw, "nested deeper than 400") {
			t.Errorf("want 400 code 3 naming the depth, got HTTP %d %.200s", a.status, a.raw)
		}
	}
	if !e.gw.Running() {
		t.Fatalf("the gateway died:\n%s", e.gw.LogTail(30))
	}
	if a := e.allocate(t); a.status != 429 {
		t.Errorf("after deep bodies: want 429 (no server), got %s", a)
	}
}

// agones-allocator answers an invalid GameServerAllocation with HTTP 500 and body code 422: passed
// on as it came.
func testInvalidRequestPassedOn(t *testing.T) {
	e := setup(t)
	a, err := e.post(t, e.client, fmt.Sprintf(`{"namespace":%q,"metadata":{"labels":{"bad key!":"x"}}}`, e.ns))
	if err != nil {
		t.Fatal(err)
	}
	if a.status != 500 || a.body["code"] != float64(422) {
		t.Fatalf("want 500 with code 422, got %s", a)
	}
	// No namespace: agones-allocator does not default it, finds no server.
	if b, _ := e.post(t, e.client, `{}`); b.status != 429 {
		t.Errorf("no namespace: want 429, got %s", b)
	}
}

// A multi-cluster policy for the local cluster allocates in the policy's namespace: the gateway
// finds the server there and answers once it is confirmed.
func testServerInPolicyNamespace(t *testing.T) {
	e := setup(t)
	policyNS := e.cp.Namespace(t)
	e.readyIn(t, policyNS, "gs-policy", harness.TimeoutKey, "20s")
	e.alloc.Policy.Store(&harness.MultiClusterPolicy{Namespace: policyNS})
	defer e.alloc.Policy.Store(nil)
	ch := make(chan answer, 1)
	go func() {
		a, err := e.post(t, e.client, fmt.Sprintf(`{"namespace":%q,"multiClusterSetting":{"enabled":true}}`, e.ns))
		if err != nil {
			a = answer{status: -1, raw: err.Error()}
		}
		ch <- a
	}()
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool { return e.stateIn(t, policyNS, "gs-policy") == "Allocating" }) {
		t.Fatalf("gs-policy never Allocating")
	}
	expectPending(t, ch, time.Second)
	sdk := e.cp.SDK(t, policyNS)
	id, err := standin.ConfirmReady(harness.Ctx(t), sdk.Dyn, policyNS, "gs-policy")
	if err != nil {
		t.Fatal(err)
	}
	a := receive(t, ch, 15*time.Second)
	if a.status != 200 || a.body["gameServerName"] != "gs-policy" || a.annotation(harness.ConfirmedKey) != id {
		t.Fatalf("want 200 naming gs-policy, confirmed %s: %s", id, a)
	}
	for _, k := range []string{"addresses", "counters", "lists", "ports"} {
		if _, ok := a.body[k]; !ok {
			t.Errorf("the answer lacks %q (EmitUnpopulated): %s", k, a)
		}
	}
}

// An allocation another cluster made (source: its endpoint) is passed through at once: the local
// watch cannot see that cluster's servers.
func testRemoteSourcePassedThrough(t *testing.T) {
	e := setup(t)
	remoteNS := e.cp.Namespace(t)
	e.readyIn(t, remoteNS, "gs-remote", harness.TimeoutKey, "20s")
	e.alloc.Policy.Store(&harness.MultiClusterPolicy{Namespace: remoteNS, RemoteEndpoint: "gateway.eu-west.example:443"})
	defer e.alloc.Policy.Store(nil)
	a, err := e.post(t, e.client, fmt.Sprintf(`{"namespace":%q,"multiClusterSetting":{"enabled":true}}`, e.ns))
	if err != nil {
		t.Fatal(err)
	}
	if a.status != 200 || a.body["source"] != "gateway.eu-west.example:443" || a.body["gameServerName"] != "gs-remote" {
		t.Fatalf("want the remote answer passed through, got %s", a)
	}
	if a.took > 3*time.Second {
		t.Errorf("took %v: the remote allocation was waited for", a.took)
	}
	if s := e.stateIn(t, remoteNS, "gs-remote"); s != "Allocating" {
		t.Errorf("gs-remote: %s (the answer was not immediate)", s)
	}
}

// A variant gateway: a plain-HTTP allocator (--disable-tls), client CAs from a directory (two,
// then a third added while running), --http-unallocated-status-code=503, --allocator-timeout=1s
// and a connection cap of 6.
func testVariantGateway(t *testing.T) {
	e := setup(t)
	plain := e.cp.StartAllocatorStandinWith(t, harness.AllocatorStandinOptions{Plain: true})
	if !strings.HasPrefix(plain.URL, "http://") {
		t.Fatalf("stand-in URL %s", plain.URL)
	}
	dir := filepath.Join(e.cp.Dir, "client-ca-dir-"+e.ns)
	caDir := filepath.Join(dir, "secret")
	if err := os.MkdirAll(caDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cas := []*harness.TestCA{}
	for i, name := range []string{"director-a-ca", "director-b-ca", "director-c-ca"} {
		cas = append(cas, harness.NewTestCA(t, filepath.Join(dir, name), name))
		if i < 2 {
			copyFile(t, cas[i].CAFile, filepath.Join(caDir, fmt.Sprintf("%s.crt", name)))
		}
	}
	if err := os.WriteFile(filepath.Join(caDir, "notes.txt"), []byte("ignored"), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := e.cp.StartWebhook(t, harness.WebhookOptions{
		Name: "gateway-variant", Binary: harness.GatewayBinary(), Wait: "readyz",
		NoDefaults: []string{"trusted-users", "agones-controller-users"},
		Args: []string{
			"--kubeconfig=" + e.cp.Kubeconfig, "--context=" + harness.Resolver,
			"--client-ca-dir=" + caDir, "--cert-reload-interval=200ms",
			"--allocator-address=" + plain.URL, "--allocator-timeout=1s",
			"--http-unallocated-status-code=503", "--max-connections=6",
			"--deadline=20s", "--log-level=debug",
		},
	})
	client := func(ca *harness.TestCA, name string) *http.Client {
		crt, key := ca.Issue(t, name, name, false)
		return harness.HTTPSClient(t, gw.CAFile, crt, key)
	}
	post := func(c *http.Client, body string, headers ...string) (answer, error) {
		saved := e.gw
		e.gw = gw
		defer func() { e.gw = saved }()
		return e.post(t, c, body, headers...)
	}
	body := fmt.Sprintf(`{"namespace":%q}`, e.ns)
	a, b, c := client(cas[0], "dir-a"), client(cas[1], "dir-b"), client(cas[2], "dir-c")
	for name, cl := range map[string]*http.Client{"a": a, "b": b} {
		if r, err := post(cl, body); err != nil || r.status != 429 {
			t.Errorf("client of CA %s: want 429 from the plain-HTTP allocator, got %v %v", name, r, err)
		}
	}
	if r, err := post(c, body); err == nil {
		t.Errorf("client of a CA not in the directory was served: %s", r)
	}
	copyFile(t, cas[2].CAFile, filepath.Join(caDir, "director-c-ca.pem"))
	if !harness.Poll(5*time.Second, 100*time.Millisecond, func() bool {
		c.CloseIdleConnections()
		r, err := post(c, body)
		return err == nil && r.status == 429
	}) {
		t.Errorf("a CA added to the directory was not picked up:\n%s", gw.LogTail(20))
	}

	// The gateway's own "no server" answer has the configured status.
	e.readyGameServer(t, "gs-never", true, harness.TimeoutKey, "20s")
	r, err := post(a, body, "X-Allocating-Deadline", "2s")
	if err != nil || r.status != 503 || r.body["code"] != float64(8) {
		t.Fatalf("want 503 with code 8 (--http-unallocated-status-code), got %v %v", r, err)
	}

	// --allocator-timeout: an allocator that takes 3 s is given up after about 1 s.
	plain.Delay.Store(int64(3 * time.Second))
	r, err = post(a, body)
	plain.Delay.Store(0)
	if err != nil || r.status != 503 || r.body["code"] != float64(14) {
		t.Fatalf("slow allocator: want 503 code 14, got %v %v", r, err)
	}
	if r.took > 2500*time.Millisecond {
		t.Errorf("slow allocator answered after %v, want about --allocator-timeout (1s)", r.took)
	}
	time.Sleep(3 * time.Second) // the slow call ends at the stand-in

	// The connection cap: a waiting request survives a flood of bare TCP connects.
	e.readyGameServer(t, "gs-cap", true, harness.TimeoutKey, "20s")
	ch := make(chan answer, 1)
	go func() {
		r, err := post(b, body)
		if err != nil {
			r = answer{status: -1, raw: err.Error()}
		}
		ch <- r
	}()
	e.waitState(t, "gs-cap", "Allocating", 10*time.Second)
	var bare []net.Conn
	for i := 0; i < 30; i++ {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", gw.Port))
		if err == nil {
			bare = append(bare, conn)
		}
	}
	time.Sleep(300 * time.Millisecond)
	e.confirm(t, "gs-cap")
	got := receive(t, ch, 15*time.Second)
	for _, conn := range bare {
		conn.Close()
	}
	if got.status != 200 || got.body["gameServerName"] != "gs-cap" {
		t.Fatalf("the waiting request did not survive the connect flood: %s", got)
	}
	if v := metric(t, gw, `allocating_webhook_connections_evicted_total{kind="waiting",listener="gateway"}`); v != 0 {
		t.Errorf("waiting requests evicted: %v", v)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// unready: whether gw's /readyz answers other than 200 within `within`.
func unready(gw *harness.Webhook, within time.Duration) bool {
	return harness.Poll(within, 20*time.Millisecond, func() bool {
		code, _, err := gw.Get("/readyz")
		return err == nil && code != 200
	})
}

// refusing: whether gw's listener refuses new connections within `within`.
func refusing(gw *harness.Webhook, within time.Duration) bool {
	return harness.Poll(within, 20*time.Millisecond, func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", gw.Port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
}

// SIGTERM: readiness fails and new connections are refused at once, but a request already waiting
// is still answered when its server is confirmed within --shutdown-grace. The allocator here has a
// certificate for its Service name only, dialled by IP with --allocator-server-name.
func testShutdownKeepsAnsweringWaiters(t *testing.T) {
	e := setup(t)
	const svc = "agones-allocator.agones-system.svc"
	named := e.cp.StartAllocatorStandinWith(t, harness.AllocatorStandinOptions{ServingSANs: []string{svc}})
	args := []string{
		"--kubeconfig=" + e.cp.Kubeconfig, "--context=" + harness.Resolver,
		"--client-ca-file=" + e.clientCA.CAFile,
		"--allocator-address=" + named.URL, // https://127.0.0.1:PORT: not in its certificate
		"--allocator-ca-file=" + named.CAFile,
		"--allocator-client-cert-file=" + named.ClientCert,
		"--allocator-client-key-file=" + named.ClientKey,
		"--deadline=30s", "--shutdown-grace=20s", "--log-level=debug",
	}
	start := func(name string, extra ...string) (*harness.Webhook, *http.Client) {
		gw := e.cp.StartWebhook(t, harness.WebhookOptions{
			Name: name, Binary: harness.GatewayBinary(), Args: append(append([]string{}, args...), extra...),
			Wait: "readyz", NoDefaults: []string{"trusted-users", "agones-controller-users"},
		})
		crt, key := e.clientCA.Issue(t, name+"-client", "director", false)
		return gw, harness.HTTPSClient(t, gw.CAFile, crt, key)
	}
	body := fmt.Sprintf(`{"namespace":%q}`, e.ns)
	postTo := func(gw *harness.Webhook, c *http.Client) (answer, error) {
		saved := e.gw
		e.gw = gw
		defer func() { e.gw = saved }()
		return e.post(t, c, body)
	}

	// Without the server name the allocator's certificate does not verify.
	unnamed, uc := start("gateway-unnamed")
	if r, err := postTo(unnamed, uc); err != nil || r.status != 503 || !strings.Contains(r.raw, "allocator unavailable") {
		t.Fatalf("without --allocator-server-name: want 503 allocator unavailable, got %v %v", r, err)
	}
	_ = unnamed.Stop(syscall.SIGTERM)

	gw, c := start("gateway-drain", "--allocator-server-name="+svc)
	e.readyGameServer(t, "gs-drain", true, harness.TimeoutKey, "25s")
	ch := make(chan answer, 1)
	go func() {
		r, err := postTo(gw, c)
		if err != nil {
			r = answer{status: -1, raw: err.Error()}
		}
		ch <- r
	}()
	e.waitState(t, "gs-drain", "Allocating", 10*time.Second)
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !unready(gw, 2*time.Second) {
		t.Errorf("readiness did not fail after SIGTERM")
	}
	if !refusing(gw, 2*time.Second) {
		t.Errorf("new connections still accepted after SIGTERM")
	}
	time.Sleep(2 * time.Second) // well into the grace period
	expectPending(t, ch, 100*time.Millisecond)
	id := e.confirm(t, "gs-drain")
	a := receive(t, ch, 15*time.Second)
	if a.status != 200 || a.body["gameServerName"] != "gs-drain" || a.annotation(harness.ConfirmedKey) != id {
		t.Fatalf("the waiting request was not answered during the grace period: %s\n%s", a, gw.LogTail(30))
	}
	if err, ok := gw.Wait(10 * time.Second); !ok || gw.ExitCode() != 0 {
		t.Errorf("gateway after SIGTERM: exit %d, %v (exited: %v)", gw.ExitCode(), err, ok)
	}
}

// --drain-delay: on SIGTERM readiness fails at once, but for the delay a new connection is still
// accepted and its allocation served as usual, answered with Connection: close once its server is
// confirmed; after the delay new connections are refused, and the process exits 0.
func testShutdownDrainDelay(t *testing.T) {
	e := setup(t)
	const svc = "agones-allocator.agones-system.svc"
	named := e.cp.StartAllocatorStandinWith(t, harness.AllocatorStandinOptions{ServingSANs: []string{svc}})
	gw := e.cp.StartWebhook(t, harness.WebhookOptions{
		Name: "gateway-drain-delay", Binary: harness.GatewayBinary(),
		Args: []string{
			"--kubeconfig=" + e.cp.Kubeconfig, "--context=" + harness.Resolver,
			"--client-ca-file=" + e.clientCA.CAFile,
			"--allocator-address=" + named.URL, "--allocator-server-name=" + svc,
			"--allocator-ca-file=" + named.CAFile,
			"--allocator-client-cert-file=" + named.ClientCert,
			"--allocator-client-key-file=" + named.ClientKey,
			"--deadline=30s", "--shutdown-grace=25s", "--drain-delay=5s", "--log-level=debug",
		},
		Wait: "readyz", NoDefaults: []string{"trusted-users", "agones-controller-users"},
	})
	crt, key := e.clientCA.Issue(t, "gateway-drain-delay-client", "director", false)
	e.readyGameServer(t, "gs-drain-delay", true, harness.TimeoutKey, "25s")

	type result struct {
		status int
		close  bool
		raw    string
		err    error
	}
	ch := make(chan result, 1)
	c := harness.HTTPSClient(t, gw.CAFile, crt, key) // a new connection: not opened before the signal
	if err := gw.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	// A matchmaker still routed here right after the signal: a new connection (its own client).
	go func() {
		req, err := http.NewRequest(http.MethodPost, gw.URL("/gameserverallocation"),
			strings.NewReader(fmt.Sprintf(`{"namespace":%q}`, e.ns)))
		if err != nil {
			ch <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := c.Do(req)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		ch <- result{status: res.StatusCode, close: res.Close, raw: string(raw)}
	}()
	if !unready(gw, 2*time.Second) {
		t.Errorf("readiness did not fail after SIGTERM")
	}
	e.waitState(t, "gs-drain-delay", "Allocating", 10*time.Second)
	if time.Since(signalled) > 5*time.Second {
		t.Fatalf("the allocation reached Allocating only %v after SIGTERM: past the drain delay", time.Since(signalled))
	}
	e.confirm(t, "gs-drain-delay")
	select {
	case r := <-ch:
		if r.err != nil || r.status != 200 || !strings.Contains(r.raw, "gs-drain-delay") {
			t.Fatalf("a request accepted during the drain delay: want 200 for gs-drain-delay, got %d %v %s\n%s",
				r.status, r.err, r.raw, gw.LogTail(30))
		}
		if !r.close {
			t.Errorf("the answer during the drain delay did not say Connection: close")
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no answer to the request accepted during the drain delay\n%s", gw.LogTail(30))
	}
	// After the delay: new connections are refused.
	if wait := time.Until(signalled.Add(5500 * time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	if !refusing(gw, 3*time.Second) {
		t.Errorf("new connections still accepted after the drain delay")
	}
	if err, ok := gw.Wait(10 * time.Second); !ok || gw.ExitCode() != 0 {
		t.Errorf("gateway after SIGTERM: exit %d, %v (exited: %v)", gw.ExitCode(), err, ok)
	}
}
