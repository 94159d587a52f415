// Package resolverburst is issue 5's scenario 8, a benchmark-style end-to-end run (opt-in: set
// AW_RESOLVER_BURST=1; bench/resolver-burst does): N opted-in GameServers (AW_BURST_N, default
// 1000) allocated at once; half confirm (SDK annotation + HTTP probe turning 200) at random times
// within 5 s of their allocation, half never do. Every one must end in the right state
// (Allocated+Confirmed or Unhealthy), and the resolver's outcome write for none may land later than
// one probe period + 1 s after the server became ready or reached its deadline. Prints
// percentiles of promotion lag and timeout lateness, both at the resolver's write (from its log)
// and as a watcher sees them, and the resolver process's CPU time and RSS (admission runs in a
// separate webhook process, so the figures are the resolver's alone).
package resolverburst

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	period  = 250 * time.Millisecond
	timeout = 10 * time.Second
	spread  = 5 * time.Second
)

type server struct {
	name       string
	ready      bool // this one confirms
	readyAfter time.Duration
	allocation string
	since      time.Time
	readyAt    time.Time // when both checks could pass (probe 200 and annotation written)
	endState   string
	endAt      time.Time
	outcome    string
}

func TestResolverBurst(t *testing.T) {
	if os.Getenv("AW_RESOLVER_BURST") == "" {
		t.Skip("benchmark-style run: set AW_RESOLVER_BURST=1 (bench/resolver-burst)")
	}
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("AW_BURST_N")); err == nil && v > 0 {
		n = v
	}
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	// Admission in one process, the resolver in another (its own CPU/RSS).
	admission := cp.StartWebhook(t, harness.WebhookOptions{Name: "admission", Args: []string{"--crd-accepts-allocating=true"}})
	cp.RegisterWebhooks(t, admission, harness.RegisterOptions{})
	res := cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: []string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver, "--crd-accepts-allocating=true",
		"--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms", "--log-level=" + logLevel(),
		"--resolver-workers=" + envOr("AW_BURST_WORKERS", "32"),
	}})
	res.WaitLeader(t, 20*time.Second)
	ns := cp.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	admin := fastDynamic(t, cp, harness.Admin)
	allocator := fastDynamic(t, cp, harness.AgonesController)
	// The game servers' own SDK identity (namespace service account agones-sdk), with a high QPS.
	sdkCfg := rest.CopyConfig(cp.SDK(t, ns).Config)
	sdkCfg.QPS, sdkCfg.Burst = 5000, 5000
	sdk, err := dynamic.NewForConfig(sdkCfg)
	if err != nil {
		t.Fatal(err)
	}
	gsc := admin.Resource(harness.GameServerGVR).Namespace(ns)

	// One HTTP listener for every stand-in: /ready/<name> answers 200 once that server loaded.
	var loaded sync.Map
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := loaded.Load(strings.TrimPrefix(r.URL.Path, "/ready/")); ok {
			w.WriteHeader(200)
			return
		}
		w.WriteHeader(503)
	}))
	httpPort := int64(ln.Addr().(*net.TCPAddr).Port)

	rng := rand.New(rand.NewSource(int64(n)))
	servers := make([]*server, n)
	for i := range servers {
		servers[i] = &server{name: fmt.Sprintf("burst-%04d", i), ready: i%2 == 0,
			readyAfter: time.Duration(rng.Int63n(int64(spread)))}
	}

	// Create and move to Ready (what Agones does before an allocation can happen).
	t0 := time.Now()
	parallel(32, servers, func(s *server) error {
		gs := harness.NewGameServer(s.name, true, harness.TimeoutKey, timeout.String(),
			harness.ProbePortKey, "http", harness.ProbePathKey, "/ready/"+s.name)
		_ = unstructured.SetNestedSlice(gs.Object, standin.SpecPorts(), "spec", "ports")
		created, err := gsc.Create(ctx, gs, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
		_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
		_ = unstructured.SetNestedSlice(created.Object, []interface{}{
			map[string]interface{}{"name": "http", "port": httpPort}}, "status", "ports")
		_, err = gsc.Update(ctx, created, metav1.UpdateOptions{})
		return err
	}, t)
	t.Logf("created %d Ready GameServers in %v", n, time.Since(t0))

	// AW_BURST_IDLE=M: M more opted-in Ready GameServers in a namespace of their own that are never
	// allocated, so the burst runs with the resolver's cache at Agones' scale (issue 33: 1,000
	// allocated at once with 20,000 cached). Created Ready in one write each.
	idle := 0
	if v, err := strconv.Atoi(os.Getenv("AW_BURST_IDLE")); err == nil && v > 0 {
		idle = v
	}
	if idle > 0 {
		idleNS := cp.Namespace(t)
		idleGSC := admin.Resource(harness.GameServerGVR).Namespace(idleNS)
		idlers := make([]*server, idle)
		for i := range idlers {
			idlers[i] = &server{name: fmt.Sprintf("idle-%05d", i)}
		}
		t2 := time.Now()
		parallel(32, idlers, func(s *server) error {
			gs := harness.NewGameServer(s.name, true, harness.TimeoutKey, timeout.String())
			_ = unstructured.SetNestedSlice(gs.Object, standin.SpecPorts(), "spec", "ports")
			_ = unstructured.SetNestedField(gs.Object, "Ready", "status", "state")
			_ = unstructured.SetNestedField(gs.Object, "127.0.0.1", "status", "address")
			_, err := idleGSC.Create(ctx, gs, metav1.CreateOptions{})
			return err
		}, t)
		t.Logf("created %d idle opted-in GameServers in %v", idle, time.Since(t2))
		want := n + idle
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if got := cachedObjects(res); got >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the resolver's cache holds %d GameServers, want %d", cachedObjects(res), want)
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Logf("the resolver's cache holds %d GameServers", want)
	}

	// Observe every state change through a watch (first time each reaches a final state).
	byName := map[string]*server{}
	for _, s := range servers {
		byName[s.name] = s
	}
	var mu sync.Mutex
	done := make(chan struct{})
	remaining := n
	observe := func(u *unstructured.Unstructured) {
		st := harness.State(u)
		if st != "Allocated" && st != "Unhealthy" && st != "Shutdown" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		s := byName[u.GetName()]
		if s != nil && s.endState == "" && s.allocation != "" {
			s.endState, s.endAt, s.outcome = st, time.Now(), harness.Annotation(u, harness.OutcomeKey)
			remaining--
			if remaining == 0 {
				close(done)
			}
		}
	}
	// A watch client without the harness's 30 s request timeout; re-listed and re-watched if the
	// stream ends.
	wcfg := cp.RESTConfig(t, harness.Admin)
	wcfg.Timeout = 0
	wdyn, err := dynamic.NewForConfig(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	wc := wdyn.Resource(harness.GameServerGVR).Namespace(ns)
	go func() {
		for ctx.Err() == nil {
			list, err := wc.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for i := range list.Items {
				observe(&list.Items[i])
			}
			w, err := wc.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Modified || ev.Type == watch.Added) {
					observe(u)
				}
			}
			w.Stop()
		}
	}()

	cpu0, _ := procCPU(res.Pid())
	// The resolver's threads: at idle (leading, cache synced) and the most seen during the burst.
	threadsIdle := procThreads(res.Pid())
	var threadsPeak atomic.Int64
	threadsPeak.Store(int64(threadsIdle))
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-sampling:
				return
			case <-time.After(20 * time.Millisecond):
				if n := int64(procThreads(res.Pid())); n > threadsPeak.Load() {
					threadsPeak.Store(n)
				}
			}
		}
	}()
	others := map[string]int{"admission_webhook": admission.Pid(), "kube_apiserver": pidFile(cp.Dir, "kube-apiserver"), "etcd": pidFile(cp.Dir, "etcd")}
	others0 := map[string]float64{}
	for k, pid := range others {
		others0[k], _ = procCPU(pid)
	}
	// Allocate all at once, like a matchmaker burst; each ready one loads, then confirms.
	t1 := time.Now()
	var wg sync.WaitGroup
	parallel(64, servers, func(s *server) error {
		// No allocator Event: the burst's API load stays what it was calibrated with.
		got, err := harness.AllocateLikeAgonesWith(ctx, allocator, ns, s.name, harness.Allocation{NoEvent: true})
		if err != nil {
			return err
		}
		if harness.State(got) != "Allocating" {
			return fmt.Errorf("%s: not held: %s", s.name, harness.Describe(got))
		}
		mu.Lock()
		s.allocation = harness.Annotation(got, harness.AllocationKey)
		s.since, _ = time.Parse(time.RFC3339Nano, harness.Annotation(got, harness.SinceKey))
		mu.Unlock()
		if s.ready {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Until(s.since.Add(s.readyAfter)))
				loaded.Store(s.name, true)
				if err := standin.SetAnnotation(ctx, sdk, ns, s.name, "allocating-ready", s.allocation); err != nil {
					t.Errorf("%s: SetAnnotation: %v", s.name, err)
				}
				mu.Lock()
				s.readyAt = time.Now()
				mu.Unlock()
			}()
		}
		return nil
	}, t)
	allocDur := time.Since(t1)
	t.Logf("allocated %d GameServers in %v", n, allocDur)
	wg.Wait()
	select {
	case <-done:
	case <-time.After(timeout + spread + 30*time.Second):
		t.Errorf("%d GameServers did not reach a final state", remaining)
	}
	cpu1, _ := procCPU(res.Pid())
	close(sampling)
	<-sampled
	otherCPU := map[string]float64{}
	for k, pid := range others {
		v, _ := procCPU(pid)
		otherCPU[k] = v - others0[k]
	}
	rss, hwm := procMem(res.Pid())

	// The resolver logs each outcome right after its write returns: give the last lines a moment.
	writes := resolverWrites(res.LogPath)
	for i := 0; i < 40 && len(writes) < n; i++ {
		time.Sleep(50 * time.Millisecond)
		writes = resolverWrites(res.LogPath)
	}
	var lags, lates, wlags, wlates []time.Duration
	wrong := 0
	_, patchDurs, queuedDurs := resolverLog(res.LogPath)
	mu.Lock()
	for _, s := range servers {
		w, haveWrite := writes[s.name]
		switch {
		case s.ready && (s.endState != "Allocated" || s.outcome != "Confirmed"):
			wrong++
			t.Errorf("%s: ready one ended %q outcome %q", s.name, s.endState, s.outcome)
		case !s.ready && (s.endState != "Unhealthy"):
			wrong++
			t.Errorf("%s: never-ready one ended %q", s.name, s.endState)
		case s.ready:
			lags = append(lags, s.endAt.Sub(s.readyAt))
			if haveWrite {
				wlags = append(wlags, w.Sub(s.readyAt))
			}
		default:
			lates = append(lates, s.endAt.Sub(s.since.Add(timeout)))
			if haveWrite {
				wlates = append(wlates, w.Sub(s.since.Add(timeout)))
			}
		}
	}
	mu.Unlock()
	// The bound applies to the resolver's writes (when the outcome is stored); what a watcher sees
	// comes later by kube-apiserver's watch fan-out, reported apart.
	limit := period + time.Second
	late := 0
	for _, d := range append(append([]time.Duration{}, wlags...), wlates...) {
		if d > limit {
			late++
		}
	}
	if late > 0 {
		t.Errorf("%d servers were resolved later than %v after becoming ready or reaching their deadline", late, limit)
	}
	if len(wlags)+len(wlates) != n-wrong {
		t.Errorf("resolver log has %d outcome writes for %d servers", len(wlags)+len(wlates), n-wrong)
	}
	for _, d := range wlates {
		if d < -100*time.Millisecond {
			t.Errorf("a server timed out %v before its deadline", -d)
			break
		}
	}
	summary := map[string]interface{}{
		"servers":                   n,
		"idle_servers_cached":       idle,
		"wrong":                     wrong,
		"late_writes":               late,
		"promotion_lag_write_ms":    pct(wlags),
		"timeout_lateness_write_ms": pct(wlates),
		"promotion_lag_watch_ms":    pct(lags),
		"timeout_lateness_watch_ms": pct(lates),
		"outcome_write_ms":          pct(patchDurs),
		"outcome_write_queued_ms":   pct(queuedDurs),
		"resolver_cpu_seconds":      cpu1 - cpu0,
		"other_cpu_seconds":         otherCPU,
		"resolver_rss_mib":          rss,
		"resolver_threads_idle":     threadsIdle,
		"resolver_threads_peak":     threadsPeak.Load(),
		"resolver_workers":          envOr("AW_BURST_WORKERS", "32"),
		"resolver_peak_rss_mib":     hwm,
		"probe_period_ms":           period.Milliseconds(),
		"allocate_seconds":          allocDur.Seconds(),
		"run_seconds":               time.Since(t1).Seconds(),
	}
	js, _ := json.MarshalIndent(summary, "", "  ")
	fmt.Printf("RESOLVER_BURST %s\n", js)
	if out := os.Getenv("AW_BURST_OUT"); out != "" {
		_ = os.WriteFile(out, js, 0o644)
	}
	metricsTail(t, res)
	t.Logf("resolver log: %s", res.LogPath)
}

func fastDynamic(t *testing.T, cp *harness.ControlPlane, identity string) dynamic.Interface {
	cfg := cp.RESTConfig(t, identity)
	cfg.QPS, cfg.Burst = 5000, 5000
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parallel(workers int, servers []*server, f func(*server) error, t *testing.T) {
	ch := make(chan *server)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range ch {
				if err := f(s); err != nil {
					t.Errorf("%s: %v", s.name, err)
				}
			}
		}()
	}
	for _, s := range servers {
		ch <- s
	}
	close(ch)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func pct(ds []time.Duration) map[string]float64 {
	if len(ds) == 0 {
		return nil
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(p float64) float64 {
		i := int(p * float64(len(ds)-1))
		return float64(ds[i].Microseconds()) / 1000
	}
	return map[string]float64{"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1), "min": at(0)}
}

// procCPU is utime+stime of pid in seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ = 100
}

// procThreads is the number of threads of pid (entries of /proc/PID/task), -1 when unreadable.
func procThreads(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// procMem is VmRSS and VmHWM of pid in MiB.
func procMem(pid int) (float64, float64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var rss, hwm float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseFloat(f[1], 64)
			rss = v / 1024
		}
		if len(f) >= 2 && f[0] == "VmHWM:" {
			v, _ := strconv.ParseFloat(f[1], 64)
			hwm = v / 1024
		}
	}
	return rss, hwm
}

func metricsTail(t *testing.T, wh *harness.Webhook) {
	_, body, err := wh.Get("/metrics")
	if err != nil {
		return
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "allocating_webhook_resolver_") || strings.HasPrefix(line, "allocating_webhook_probes_total") ||
			strings.HasPrefix(line, "allocating_webhook_allocating_servers") {
			t.Log(line)
		}
	}
}

// cachedObjects is the resolver's allocating_webhook_kube_informer_objects{informer="gameservers"}
// (0 when /metrics cannot be read).
func cachedObjects(wh *harness.Webhook) int {
	_, body, err := wh.Get("/metrics")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, `allocating_webhook_kube_informer_objects{informer="gameservers"}`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v)
		}
	}
	return 0
}

func logLevel() string {
	if v := os.Getenv("AW_BURST_LOG_LEVEL"); v != "" {
		return v
	}
	return "info"
}

// resolverWrites maps each GameServer name to when the resolver's outcome write completed (the
// "ts" of its "promoted"/"timed out" log line: the write is in etcd at that moment; watchers see
// it after kube-apiserver's fan-out).
func resolverWrites(path string) map[string]time.Time {
	out, _, _ := resolverLog(path)
	return out
}

// resolverLog also returns how long each outcome write took (patch_seconds) and waited for a
// worker (queued_seconds).
func resolverLog(path string) (map[string]time.Time, []time.Duration, []time.Duration) {
	out := map[string]time.Time{}
	var patch, queued []time.Duration
	b, err := os.ReadFile(path)
	if err != nil {
		return out, nil, nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		var r map[string]string
		if json.Unmarshal([]byte(line), &r) != nil ||
			(r["msg"] != "resolver: timed out" && r["msg"] != "resolver: promoted to Allocated") {
			continue
		}
		if v, err := strconv.ParseFloat(r["patch_seconds"], 64); err == nil {
			patch = append(patch, time.Duration(v*float64(time.Second)))
		}
		if v, err := strconv.ParseFloat(r["queued_seconds"], 64); err == nil {
			queued = append(queued, time.Duration(v*float64(time.Second)))
		}
		ts, err := time.Parse(time.RFC3339Nano, r["ts"])
		if err != nil {
			continue
		}
		name := r["gameserver"][strings.LastIndexByte(r["gameserver"], '/')+1:]
		out[name] = ts
	}
	return out, patch, queued
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func pidFile(dir, name string) int {
	b, err := os.ReadFile(dir + "/" + name + ".pid")
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
