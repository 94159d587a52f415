// Package gatewaybench is issue 11's figures as a benchmark (opt-in: AW_GATEWAY_BENCH=1;
// bench/gateway sets it): the real allocation-gateway in front of the stand-in agones-allocator
// (cached mode: an informer-like cache and concurrent allocations, as agones-allocator), with the
// webhook + resolver, on the harness's real kube-apiserver, driven by a matchmaker over mTLS and
// game servers that confirm through the SDK's SetAnnotation (the game server's own identity).
//
//  1. latency: N (200) concurrent waiting allocations, all held before the first confirmation;
//     the game servers then confirm at random over 5 s (AW_GATEWAY_BENCH_SPREAD): 40/s, a rate
//     the API server of this 2-core machine serves. The figure is (gateway answer arrived) -
//     (GameServer seen Allocated by this process's watch). Target p99 <= 50 ms.
//     1b. latency-grpc: the same over gRPC (allocation.AllocationService/Allocate on the gateway's
//     port), N calls at once on one connection as a matchmaker's director makes them (a Go client
//     generated from proto/, mTLS). Target p99 <= 50 ms.
//     1c. latency-burst: the same over REST with the N confirmations within 1 s, reported (not
//     enforced): there the API server is saturated and the figure is bounded by one API write.
//     Each run also reports the control: the latency of the same kind of write as the delivery
//     mark, made every 50 ms during the run on a server nobody allocates.
//  2. concurrent: N (1000) concurrent waiting allocations, each confirmed 2 s after its server
//     was held (and not before every one of them is held, so all N wait at once): all answered
//     200, the gateway's peak RSS (VmHWM) < 64 MiB, its thread count (sampled during the wait)
//     within the bound its flags give.
//  3. retry: the first server never confirms (timeout 2s, on-timeout Unhealthy); the gateway
//     allocates again and the request succeeds within its deadline.
//
// Prints one `RESULT gateway-...` line per figure and fails (non-zero exit) when a figure is
// missed or the run breaks. AW_GATEWAY_BENCH_QUICK=1: smaller counts (smoke run). Without
// AW_GATEWAY_BENCH (the e2e suite) it is a smoke run with 10 / 50 allocations whose latency target
// is reported but not enforced (CI machines are shared); everything else is checked.
package gatewaybench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

// The gateway's flags that bound its threads and its calls in flight (its defaults, passed
// explicitly so the figures printed are those in force).
const (
	ioThreads        = 2
	allocatorWorkers = 8
	deliveryWorkers  = 16
	// gateway_main.cpp's count besides --io-threads: the dispatcher (runtime::Dispatcher: the
	// health listener, the certificate and client CA pollers' timers and the waiters' timers),
	// main (signals), the manager's thread, its one runnable's thread (the cache's), and the I/O
	// thread of the Kubernetes client (net::IoThreadClient), where the informer, the allocator
	// client's calls and the delivery marks' writes run: 5, whatever the number of requests and
	// whatever --allocator-workers and --delivery-workers say (calls in flight, not threads).
	fixedThreads = 5
)

// Per-namespace behaviour of the game servers (driven by the bench's watch).
type phase struct {
	ns      string
	sdk     dynamic.Interface
	hold    time.Duration // confirm this long after the server was seen Allocating
	jitter  time.Duration // plus a random delay in [0, jitter)
	never   map[string]bool
	expect  int           // servers to be held before anyone confirms (0: no such wait)
	held    atomic.Int64  // servers seen Allocating
	allHeld chan struct{} // closed when held reaches expect
	rng     *rand.Rand
	rngMu   sync.Mutex
}

type record struct {
	allocatingAt time.Time
	allocatedAt  time.Time
	allocatedRV  string
	confirmedAt  time.Time
}

type bench struct {
	t        *testing.T
	cp       *harness.ControlPlane
	ctx      context.Context
	admin    dynamic.Interface
	gw       *harness.Webhook
	resolver *harness.Webhook // webhook + resolver
	alloc    *harness.AllocatorStandin
	client   *http.Client
	grpcConn *grpc.ClientConn // one connection: every gRPC call is a stream on it
	mu       sync.Mutex
	records  map[string]*record // ns/name
	phases   map[string]*phase
	confirms sync.WaitGroup
	smoke    bool // the e2e suite's smoke run: the latency target is reported, not enforced
}

func TestGatewayBench(t *testing.T) {
	// Without AW_GATEWAY_BENCH (the e2e suite, test/e2e/run): a smoke run of the same code with
	// small counts that checks what does not depend on the machine's load (every request answered
	// 200, the retry, the thread bound, RSS) and reports the latency without enforcing its target.
	smoke := os.Getenv("AW_GATEWAY_BENCH") == ""
	quick := os.Getenv("AW_GATEWAY_BENCH_QUICK") != ""
	nLatency, nConcurrent := 200, 1000
	switch {
	case smoke:
		nLatency, nConcurrent = 10, 50
	case quick:
		nLatency, nConcurrent = 20, 100
	}
	if v, err := strconv.Atoi(os.Getenv("AW_GATEWAY_BENCH_LATENCY_N")); err == nil && v > 0 {
		nLatency = v
	}
	if v, err := strconv.Atoi(os.Getenv("AW_GATEWAY_BENCH_CONCURRENT_N")); err == nil && v > 0 {
		nConcurrent = v
	}
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b := &bench{t: t, cp: cp, ctx: ctx, admin: fastDynamic(t, cp.RESTConfig(t, harness.Admin)),
		records: map[string]*record{}, phases: map[string]*phase{}}

	// Admission in one process (quiet), the resolver in another (info: its "promoted" lines time
	// the Allocated writes), as bench/resolver-burst.
	admission := cp.StartWebhook(t, harness.WebhookOptions{Name: "admission", Args: []string{
		"--crd-accepts-allocating=true", "--log-level=warn"}})
	cp.RegisterWebhooks(t, admission, harness.RegisterOptions{})
	b.resolver = cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: []string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver, "--crd-accepts-allocating=true",
		// Leader election at its defaults (15s/10s/2s): a loaded machine must not lose the lease
		// mid-run.
		"--log-level=info", "--resolver-workers=32",
	}})
	b.resolver.WaitLeader(t, 20*time.Second)
	b.alloc = cp.StartAllocatorStandinWith(t, harness.AllocatorStandinOptions{Cached: true})
	clientCA := harness.NewTestCA(t, filepath.Join(cp.Dir, "gateway-clients"), "matchmaker-ca")
	var gwEnv []string
	if v := os.Getenv("AW_GATEWAY_BENCH_GW_ENV"); v != "" {
		gwEnv = strings.Fields(v) // e.g. MALLOC_ARENA_MAX=2, for investigations
	}
	b.gw = cp.StartWebhook(t, harness.WebhookOptions{
		Name: "gateway", Env: gwEnv, Binary: harness.GatewayBinary(), Wait: "readyz",
		NoDefaults: []string{"trusted-users", "agones-controller-users"},
		Args: []string{
			"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver,
			"--client-ca-file=" + clientCA.CAFile,
			"--allocator-address=" + b.alloc.URL, "--allocator-ca-file=" + b.alloc.CAFile,
			"--allocator-client-cert-file=" + b.alloc.ClientCert, "--allocator-client-key-file=" + b.alloc.ClientKey,
			fmt.Sprintf("--io-threads=%d", ioThreads), fmt.Sprintf("--allocator-workers=%d", allocatorWorkers),
			fmt.Sprintf("--delivery-workers=%d", deliveryWorkers),
			"--deadline=60s", "--log-level=warn",
		},
	})
	crt, key := clientCA.Issue(t, "director", "director", false)
	b.client = mtlsClient(t, b.gw.CAFile, crt, key)
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", b.gw.Port),
		grpc.WithTransportCredentials(credentials.NewTLS(harness.ClientTLS(t, b.gw.CAFile, crt, key))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b.grpcConn = conn
	go b.watch()

	idleThreads, _ := procStatus(b.gw.Pid(), "Threads")
	bound := ioThreads + fixedThreads
	t.Logf("gateway pid %d: %d threads at idle (bound from its flags: %d)", b.gw.Pid(), idleThreads, bound)

	summary := map[string]interface{}{"quick": quick, "smoke": smoke}
	b.smoke = smoke
	// Figure 1 at a confirmation rate this machine's API server serves (200 over 5 s: 40/s),
	// REST then gRPC, the 50 ms target enforced; then the burst (200 within 1 s), reported with
	// what one API write costs meanwhile (docs/gateway.md "Figures").
	spread := 5 * time.Second
	if v, err := time.ParseDuration(os.Getenv("AW_GATEWAY_BENCH_SPREAD")); err == nil && v > 0 {
		spread = v
	}
	for _, run := range []latencyRun{
		{figure: "gateway-latency", key: "latency", spread: spread, enforced: true},
		{figure: "gateway-latency-grpc", key: "latency_grpc", overGRPC: true, spread: spread, enforced: true},
		{figure: "gateway-latency-burst", key: "latency_burst", spread: time.Second},
	} {
		b.latency(nLatency, summary, run)
		b.client.CloseIdleConnections()
	}
	// Each figure with its own connections: the matchmaker's idle keep-alive connections of the
	// previous phase are closed (the gateway frees them when the client closes).
	b.client.CloseIdleConnections()
	time.Sleep(time.Second)
	b.concurrent(nConcurrent, idleThreads, bound, summary)
	b.client.CloseIdleConnections()
	b.retry(summary)
	b.confirms.Wait()
	js, _ := json.MarshalIndent(summary, "", "  ")
	t.Logf("summary: %s", js)
	if out := os.Getenv("AW_GATEWAY_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out, js, 0o644)
	}
	if t.Failed() {
		t.Logf("gateway log tail:\n%s", b.gw.LogTail(30))
	}
}

// ---- figure 1 -----------------------------------------------------------------------------

// latencyRun is one run of figure 1: n waiting allocations, all held before the first
// confirmation, then confirmations spread evenly at random over `spread`.
type latencyRun struct {
	figure, key string
	overGRPC    bool
	spread      time.Duration
	enforced    bool // the 50 ms target fails the bench (else it is reported)
}

func (b *bench) latency(n int, summary map[string]interface{}, run latencyRun) {
	t := b.t
	figure, key := run.figure, run.key
	p := b.newPhase(n, 0, run.spread, nil)
	b.createServers(p.ns, "lat", n, harness.TimeoutKey, "60s")
	// The control: while the confirmations land, the same kind of write as the delivery mark (a
	// JSON patch of one annotation on a GameServer, reviewed by no webhook) on a server of the
	// namespace of its own (so that no allocation takes it), every 50 ms (20 writes/s: a sample
	// without adding much load of its own). Its latency is what one
	// API write costs at that moment; the gateway's added time includes exactly one such write.
	controlNS := b.cp.Namespace(t)
	b.cp.CreateReadyGameServer(t, controlNS, harness.NewGameServer("control", false, "bench.allocating.agones.dev/control", "0"))
	controlDone := make(chan struct{})
	controlOut := make(chan []time.Duration, 1)
	go func() {
		var out []time.Duration
		defer func() { controlOut <- out }()
		select {
		case <-p.allHeld:
		case <-controlDone:
			return
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		gvr := b.admin.Resource(harness.GameServerGVR).Namespace(controlNS)
		for i := 0; ; i++ {
			select {
			case <-controlDone:
				return
			case <-tick.C:
			}
			body := fmt.Sprintf(`[{"op":"replace","path":"/metadata/annotations/%s","value":"%d"}]`,
				harness.EscapeJSONPointer("bench.allocating.agones.dev/control"), i)
			t0 := time.Now()
			if _, err := gvr.Patch(b.ctx, "control", types.JSONPatchType, []byte(body), metav1.PatchOptions{}); err != nil {
				t.Errorf("%s: the control write: %v", key, err)
				return
			}
			out = append(out, time.Since(t0))
		}
	}()
	var answers []answer
	if run.overGRPC {
		answers = b.allocateAllGRPC(p.ns, n, 60*time.Second)
	} else {
		answers = b.allocateAll(p.ns, n, []string{"X-Allocating-Deadline", "60s"})
	}
	close(controlDone)
	control := <-controlOut
	var deltas []time.Duration
	failed := 0
	for _, a := range answers {
		if a.status != 200 {
			failed++
			t.Errorf("%s: %s", key, a)
			continue
		}
		r := b.rec(p.ns, a.name)
		if r == nil || r.allocatedAt.IsZero() {
			// The answer may arrive before this process's watch sees Allocated: wait for it.
			harness.Poll(5*time.Second, 5*time.Millisecond, func() bool {
				r = b.rec(p.ns, a.name)
				return r != nil && !r.allocatedAt.IsZero()
			})
		}
		if r == nil || r.allocatedAt.IsZero() {
			failed++
			t.Errorf("%s: %s answered but never seen Allocated", key, a.name)
			continue
		}
		deltas = append(deltas, a.at.Sub(r.allocatedAt))
	}
	// A second reference, reported apart: the resolver's Allocated write (its log line's time,
	// logged when the PATCH returned), so the watch fan-out to the gateway is inside the figure.
	writes := resolverWrites(b.resolver.LogPath)
	var fromWrite []time.Duration
	for _, a := range answers {
		if w, ok := writes[p.ns+"/"+a.name]; ok && a.status == 200 {
			fromWrite = append(fromWrite, a.at.Sub(w))
		}
	}
	summary[key+"_answer_minus_resolver_write_ms"] = stats(fromWrite)
	st := stats(deltas)
	sw := stats(fromWrite)
	sc := stats(control)
	target := "target_p99<=50ms"
	if !run.enforced {
		target = "reported"
	}
	fmt.Printf("RESULT %s p50=%.1fms p99=%.1fms max=%.1fms min=%.1fms n=%d failed=%d confirmations_over=%s %s "+
		"(one API write meanwhile: p50=%.1fms p99=%.1fms n=%.0f; from the resolver's write: p50=%.1fms p99=%.1fms max=%.1fms n=%.0f)\n",
		figure, st["p50"], st["p99"], st["max"], st["min"], len(deltas), failed, run.spread, target,
		sc["p50"], sc["p99"], sc["n"], sw["p50"], sw["p99"], sw["max"], sw["n"])
	summary[key+"_answer_minus_allocated_ms"] = st
	summary[key+"_api_write_ms"] = sc
	summary[key+"_n"] = n
	summary[key+"_spread_s"] = run.spread.Seconds()
	summary[key+"_failed"] = failed
	summary[key+"_promotion_ms"] = stats(b.promotionLags(p.ns))
	if len(deltas) != n {
		t.Errorf("%s: %d of %d measured", key, len(deltas), n)
	}
	switch {
	case st["p99"] <= 50 || !run.enforced:
	case b.smoke:
		t.Logf("smoke run: %s p99 %.1f ms above the 50 ms target (not enforced here; bench/gateway enforces it)", key, st["p99"])
	default:
		t.Errorf("%s figure missed: p99 %.1f ms (target <= 50 ms)", key, st["p99"])
	}
}

// ---- figure 2 -----------------------------------------------------------------------------

func (b *bench) concurrent(n, idleThreads, bound int, summary map[string]interface{}) {
	t := b.t
	p := b.newPhase(n, 2*time.Second, 0, nil)
	// The request's deadline covers the allocation of all n, the hold and the promotion burst on a
	// shared 2-core machine; each server's own timeout likewise.
	b.createServers(p.ns, "con", n, harness.TimeoutKey, "170s")
	rssBefore, _ := procStatus(b.gw.Pid(), "VmRSS")
	// Sample the gateway's threads and its waiting gauge during the run.
	stop := make(chan struct{})
	var peakThreads, peakWaiting, peakRSS int
	type sample struct {
		T       float64 `json:"t_s"`
		RSSMiB  float64 `json:"rss_mib"`
		Waiting int     `json:"waiting"`
		Open    int     `json:"connections"`
	}
	var timeline []sample
	tStart := time.Now()
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			if th, err := procStatus(b.gw.Pid(), "Threads"); err == nil && th > peakThreads {
				peakThreads = th
			}
			rss, _ := procStatus(b.gw.Pid(), "VmRSS")
			if rss > peakRSS {
				peakRSS = rss
			}
			if i%4 == 0 {
				waiting, open := -1, -1
				if code, body, err := b.gw.Get("/metrics"); err == nil && code == 200 {
					if v, err := strconv.ParseFloat(harness.MetricValue(body, "allocating_gateway_waiting"), 64); err == nil {
						waiting = int(v)
						if waiting > peakWaiting {
							peakWaiting = waiting
						}
					}
					open = labelledValue(body, "allocating_webhook_connections_open", `listener="gateway"`)
				}
				timeline = append(timeline, sample{T: time.Since(tStart).Seconds(), RSSMiB: float64(rss) / 1024, Waiting: waiting, Open: open})
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t0 := time.Now()
	ramp, _ := time.ParseDuration(os.Getenv("AW_GATEWAY_BENCH_RAMP"))
	answers := b.allocateAllRamp(p.ns, n, ramp, []string{"X-Allocating-Deadline", "180s"})
	took := time.Since(t0)
	time.Sleep(500 * time.Millisecond) // one more sample after the last answer
	close(stop)
	sampler.Wait()
	rssAfter, _ := procStatus(b.gw.Pid(), "VmRSS")
	hwm, _ := procStatus(b.gw.Pid(), "VmHWM")
	ok, failed := 0, 0
	codes := map[int]int{}
	var waits []time.Duration
	for _, a := range answers {
		codes[a.status]++
		if a.status == 200 {
			ok++
			waits = append(waits, a.took)
		} else {
			failed++
			if failed <= 5 {
				t.Errorf("concurrent: %s", a)
			}
		}
	}
	hwmMiB := float64(hwm) / 1024
	perConn := (hwmMiB - float64(rssBefore)/1024) * 1024 / float64(n)
	fmt.Printf("RESULT gateway-concurrent n=%d answered_200=%d failed=%d peak_waiting=%d rss_peak=%.1fMiB rss_before=%.1fMiB rss_after=%.1fMiB per_request=%.0fKiB threads_peak=%d threads_idle=%d threads_bound=%d (io-threads=%d allocator-workers=%d) run=%.1fs target: all 200, rss<64MiB, threads<=bound\n",
		n, ok, failed, peakWaiting, hwmMiB, float64(rssBefore)/1024, float64(rssAfter)/1024, perConn, peakThreads, idleThreads, bound, ioThreads, allocatorWorkers, took.Seconds())
	summary["concurrent"] = map[string]interface{}{
		"n": n, "answered_200": ok, "failed": failed, "codes": codes, "peak_waiting": peakWaiting,
		"vmhwm_mib": hwmMiB, "vmrss_before_mib": float64(rssBefore) / 1024, "vmrss_peak_mib": float64(peakRSS) / 1024, "threads_peak": peakThreads,
		"threads_idle": idleThreads, "threads_bound": bound, "run_seconds": took.Seconds(),
		"request_ms": stats(waits), "promotion_ms": stats(b.promotionLags(p.ns)),
		"vmrss_after_mib": float64(rssAfter) / 1024, "ramp_seconds": ramp.Seconds(),
		"gateway_env": os.Getenv("AW_GATEWAY_BENCH_GW_ENV"), "timeline": timeline,
	}
	if failed > 0 {
		t.Errorf("concurrent figure missed: %d of %d not answered 200 (%v)", failed, n, codes)
	}
	if hwmMiB >= 64 {
		t.Errorf("concurrent figure missed: gateway peak RSS %.1f MiB (target < 64 MiB)", hwmMiB)
	}
	if peakThreads > bound {
		t.Errorf("concurrent figure missed: gateway ran %d threads (bound %d from its flags)", peakThreads, bound)
	}
	if peakWaiting < n*9/10 {
		t.Errorf("concurrent: only %d requests were waiting at once (want about %d)", peakWaiting, n)
	}
}

// ---- figure 3 -----------------------------------------------------------------------------

func (b *bench) retry(summary map[string]interface{}) {
	t := b.t
	p := b.newPhase(0, 300*time.Millisecond, 0, map[string]bool{"a-never": true})
	b.cp.CreateReadyGameServer(t, p.ns, harness.NewGameServer("a-never", true, harness.TimeoutKey, "2s", harness.OnTimeoutKey, "Unhealthy"))
	b.cp.CreateReadyGameServer(t, p.ns, harness.NewGameServer("b-good", true, harness.TimeoutKey, "20s"))
	b.waitAllocatable(p.ns, 2)
	calls0 := b.alloc.Calls.Load()
	const deadline = 15 * time.Second
	answers := b.allocateAll(p.ns, 1, []string{"X-Allocating-Deadline", deadline.String()})
	a := answers[0]
	attempts := b.alloc.Calls.Load() - calls0
	neverState := harness.State(b.getGS(p.ns, "a-never"))
	success := a.status == 200 && a.name == "b-good" && a.took < deadline
	fmt.Printf("RESULT gateway-retry success=%t status=%d server=%s attempts=%d total=%.2fs deadline=%v first_server_state=%s\n",
		success, a.status, a.name, attempts, a.took.Seconds(), deadline, neverState)
	summary["retry"] = map[string]interface{}{"success": success, "status": a.status, "server": a.name,
		"attempts": attempts, "total_seconds": a.took.Seconds(), "deadline_seconds": deadline.Seconds(),
		"first_server_state": neverState}
	if !success {
		t.Errorf("retry figure missed: %s after %v, %d attempts", a, a.took, attempts)
	}
}

// ---- machinery ----------------------------------------------------------------------------

func (b *bench) newPhase(expect int, hold, jitter time.Duration, never map[string]bool) *phase {
	ns := b.cp.Namespace(b.t)
	cfg := rest.CopyConfig(b.cp.SDK(b.t, ns).Config)
	p := &phase{ns: ns, sdk: fastDynamic(b.t, cfg), hold: hold, jitter: jitter, never: never, expect: expect,
		allHeld: make(chan struct{}), rng: rand.New(rand.NewSource(int64(expect) + 1))}
	if expect == 0 {
		close(p.allHeld)
	}
	b.mu.Lock()
	b.phases[ns] = p
	b.mu.Unlock()
	return p
}

func (b *bench) rec(ns, name string) *record {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.records[ns+"/"+name]; r != nil {
		c := *r
		return &c
	}
	return nil
}

func (b *bench) promotionLags(ns string) []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []time.Duration
	for k, r := range b.records {
		if strings.HasPrefix(k, ns+"/") && !r.confirmedAt.IsZero() && !r.allocatedAt.IsZero() {
			out = append(out, r.allocatedAt.Sub(r.confirmedAt))
		}
	}
	return out
}

// watch observes every GameServer: when one is first seen Allocating its game server confirms
// (per its phase); when it is first seen Allocated after that, the time (and resourceVersion) is
// recorded. Re-lists and re-watches when the stream ends.
func (b *bench) watch() {
	cfg := b.cp.RESTConfig(b.t, harness.Admin)
	cfg.Timeout = 0
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.t.Error(err)
		return
	}
	gsc := dyn.Resource(harness.GameServerGVR)
	for b.ctx.Err() == nil {
		list, err := gsc.List(b.ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			b.observe(&list.Items[i])
		}
		w, err := gsc.Watch(b.ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Modified || ev.Type == watch.Added) {
				b.observe(u)
			}
		}
		w.Stop()
	}
}

func (b *bench) observe(u *unstructured.Unstructured) {
	now := time.Now()
	key := u.GetNamespace() + "/" + u.GetName()
	st := harness.State(u)
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.phases[u.GetNamespace()]
	r := b.records[key]
	switch {
	case st == "Allocating" && r == nil && p != nil:
		r = &record{allocatingAt: now}
		b.records[key] = r
		id := harness.Annotation(u, harness.AllocationKey)
		if p.held.Add(1) == int64(p.expect) {
			close(p.allHeld)
		}
		if !p.never[u.GetName()] {
			b.confirms.Add(1)
			go b.confirm(p, u.GetName(), id, now)
		}
	case st == "Allocated" && r != nil && r.allocatedAt.IsZero():
		r.allocatedAt, r.allocatedRV = now, u.GetResourceVersion()
	}
}

// confirm is the game server: loaded `hold` (+ jitter) after it was allocated, and not before
// every server of its phase is held, it calls SDK SetAnnotation("allocating-ready", id).
func (b *bench) confirm(p *phase, name, id string, heldAt time.Time) {
	defer b.confirms.Done()
	p.rngMu.Lock()
	var j time.Duration
	if p.jitter > 0 {
		j = time.Duration(p.rng.Int63n(int64(p.jitter)))
	}
	p.rngMu.Unlock()
	time.Sleep(time.Until(heldAt.Add(p.hold)))
	select {
	case <-p.allHeld:
	case <-b.ctx.Done():
		return
	case <-time.After(2 * time.Minute):
		b.t.Errorf("%s/%s: its phase's servers were never all held", p.ns, name)
		return
	}
	time.Sleep(j)
	if err := standin.SetAnnotation(b.ctx, p.sdk, p.ns, name, "allocating-ready", id); err != nil {
		b.t.Errorf("%s/%s: SetAnnotation: %v", p.ns, name, err)
		return
	}
	b.mu.Lock()
	if r := b.records[p.ns+"/"+name]; r != nil {
		r.confirmedAt = time.Now()
	}
	b.mu.Unlock()
}

// createServers creates n opted-in GameServers prefix-NNNN and moves them to Ready as Agones
// would (harness.CreateReady's two writes), 32 at a time.
func (b *bench) createServers(ns, prefix string, n int, annotations ...string) []string {
	t0 := time.Now()
	names, errs := harness.CreateReadyMany(b.ctx, b.admin, ns, prefix, n, 32, annotations...)
	if len(errs) > 0 {
		b.t.Fatalf("%s: %d GameServers could not be created, first: %v", ns, len(errs), errs[0])
	}
	b.t.Logf("%s: %d Ready GameServers created in %v", ns, n, time.Since(t0).Round(time.Millisecond))
	b.waitAllocatable(ns, n)
	return names
}

// waitAllocatable waits until the stand-in allocator's cache (fed by its watch) holds n Ready
// servers of ns, as a Fleet's servers are allocatable only once the allocator's informer has them.
func (b *bench) waitAllocatable(ns string, n int) {
	if !harness.Poll(60*time.Second, 20*time.Millisecond, func() bool { return b.alloc.CachedReady(ns) >= n }) {
		b.t.Fatalf("%s: the stand-in allocator's cache has %d of %d Ready servers after 60s", ns, b.alloc.CachedReady(ns), n)
	}
}

func (b *bench) getGS(ns, name string) *unstructured.Unstructured {
	u, err := b.admin.Resource(harness.GameServerGVR).Namespace(ns).Get(b.ctx, name, metav1.GetOptions{})
	if err != nil {
		b.t.Errorf("get %s/%s: %v", ns, name, err)
		return &unstructured.Unstructured{Object: map[string]interface{}{}}
	}
	return u
}

type answer struct {
	status int
	name   string
	raw    string
	took   time.Duration
	at     time.Time
}

func (a answer) String() string {
	raw := a.raw
	if len(raw) > 300 {
		raw = raw[:300] + "..."
	}
	return fmt.Sprintf("HTTP %d after %v: %s", a.status, a.took.Round(time.Millisecond), raw)
}

// allocateAll sends n allocations of namespace ns at once (n connections) and returns every
// answer, with the time it arrived.
func (b *bench) allocateAll(ns string, n int, headers []string) []answer {
	return b.allocateAllRamp(ns, n, 0, headers)
}

// allocateAllRamp starts the n requests evenly over `ramp` (0: all at once).
func (b *bench) allocateAllRamp(ns string, n int, ramp time.Duration, headers []string) []answer {
	out := make([]answer, n)
	var wg sync.WaitGroup
	body := fmt.Sprintf(`{"namespace":%q,"metadata":{"labels":{"match":"bench"}}}`, ns)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if ramp > 0 {
			time.Sleep(time.Until(t0.Add(ramp * time.Duration(i) / time.Duration(n))))
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out[i] = b.post(body, headers)
		}(i)
	}
	wg.Wait()
	return out
}

// allocateAllGRPC makes n Allocate calls at once on the one gRPC connection (n streams), each
// with `deadline` (grpc-timeout); an error answer has status -(its gRPC code) - 1000.
func (b *bench) allocateAllGRPC(ns string, n int, deadline time.Duration) []answer {
	out := make([]answer, n)
	var wg sync.WaitGroup
	client := pb.NewAllocationServiceClient(b.grpcConn)
	req := &pb.AllocationRequest{Namespace: ns, Metadata: &pb.MetaPatch{Labels: map[string]string{"match": "bench"}}}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(b.ctx, deadline)
			defer cancel()
			start := time.Now()
			res, err := client.Allocate(ctx, req)
			a := answer{status: 200, at: time.Now()}
			a.took = a.at.Sub(start)
			if err != nil {
				a.status = -1000 - int(status.Code(err))
				a.raw = err.Error()
			} else {
				a.name = res.GameServerName
			}
			out[i] = a
		}(i)
	}
	wg.Wait()
	return out
}

func (b *bench) post(body string, headers []string) answer {
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.gw.URL("/gameserverallocation"), bytes.NewBufferString(body))
	if err != nil {
		return answer{status: -1, raw: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	res, err := b.client.Do(req)
	if err != nil {
		return answer{status: -1, raw: err.Error(), took: time.Since(start)}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(raw), at: time.Now()}
	a.took = a.at.Sub(start)
	var parsed struct {
		GameServerName string `json:"gameServerName"`
	}
	_ = json.Unmarshal(raw, &parsed)
	a.name = parsed.GameServerName
	return a
}

func mtlsClient(t *testing.T, caFile, certFile, keyFile string) *http.Client {
	return &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     harness.ClientTLS(t, caFile, certFile, keyFile),
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		TLSHandshakeTimeout: 30 * time.Second,
	}}
}

func fastDynamic(t *testing.T, cfg *rest.Config) dynamic.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5000, 5000
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stats: percentiles in milliseconds (nearest rank).
func stats(ds []time.Duration) map[string]float64 {
	out := map[string]float64{"n": float64(len(ds))}
	if len(ds) == 0 {
		return out
	}
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return float64(s[i].Microseconds()) / 1000
	}
	out["p50"], out["p90"], out["p99"], out["max"], out["min"] = at(0.5), at(0.9), at(0.99), at(1), float64(s[0].Microseconds())/1000
	return out
}

// procStatus reads one numeric field of /proc/PID/status (kB for the Vm* fields).
func procStatus(pid int, field string) (int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// resolverWrites maps ns/name to the time of the resolver's "promoted to Allocated" log line
// (written when its PATCH returned).
func resolverWrites(path string) map[string]time.Time {
	out := map[string]time.Time{}
	raw, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var r map[string]string
		if json.Unmarshal([]byte(line), &r) != nil || r["msg"] != "resolver: promoted to Allocated" {
			continue
		}
		if ts, err := time.Parse(time.RFC3339Nano, r["ts"]); err == nil {
			out[r["gameserver"]] = ts
		}
	}
	return out
}

// labelledValue is the integer value of the series `name{...label...}` in a /metrics text (-1
// when absent).
func labelledValue(exposition, name, label string) int {
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, label) {
			f := strings.Fields(l)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				return int(v)
			}
		}
	}
	return -1
}
