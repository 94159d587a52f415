// Package allocwrites is issue 33's third part as a benchmark-style end-to-end run (opt-in: set
// AW_ALLOCATION_WRITES=1; bench/allocation-writes does): how many API writes one gated allocation
// costs against an ungated one, in the same run, on a real kube-apiserver. K opted-in GameServers
// are allocated as Agones' allocator does (one PUT and its Event) and confirm as the SDK sidecar
// does (one JSON patch); the resolver promotes them. Then K GameServers that did not opt in are
// allocated the same way. kube-apiserver's own apiserver_request_total (scraped from its /metrics
// before and after each phase) counts the writes (verbs POST, PUT, PATCH, DELETE, APPLY) by
// resource; the allocator's and the SDK's writes are counted by this test as it sends them, so the
// resolver's share is the rest. Leases are whatever was renewed over the same window (the
// resolver's leader election and kube-apiserver's own identity lease). Prints one
// ALLOCATION_WRITES JSON line.
package allocwrites

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

// TestMain brings up a control plane only when the benchmark is asked for: in the default suite the
// package costs nothing.
func TestMain(m *testing.M) {
	if os.Getenv("AW_ALLOCATION_WRITES") == "" {
		os.Exit(m.Run())
	}
	harness.Main(m)
}

// counts are apiserver_request_total write requests by "resource/VERB" (subresource appended to
// the resource as resource/sub when present).
type counts map[string]float64

var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true,
	"CREATE": true, "UPDATE": true, "DELETECOLLECTION": true}

// scrape reads kube-apiserver's /metrics as admin and sums apiserver_request_total over codes for
// the write verbs.
func scrape(ctx context.Context, t *testing.T, cs kubernetes.Interface) counts {
	t.Helper()
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	c := counts{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len("apiserver_request_total{"):end], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		verb := strings.ToUpper(labels["verb"])
		if !writeVerbs[verb] || labels["dry_run"] != "" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		res := labels["resource"]
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		c[res+"/"+verb] += v
	}
	return c
}

// delta is after - before, restricted to resource (all verbs) and split by verb.
func delta(before, after counts, resource string) (float64, map[string]float64) {
	total := 0.0
	byVerb := map[string]float64{}
	for k, v := range after {
		i := strings.LastIndexByte(k, '/')
		if k[:i] != resource {
			continue
		}
		if d := v - before[k]; d > 0 {
			byVerb[k[i+1:]] += d
			total += d
		}
	}
	return total, byVerb
}

func TestAllocationWrites(t *testing.T) {
	if os.Getenv("AW_ALLOCATION_WRITES") == "" {
		t.Skip("benchmark-style run: set AW_ALLOCATION_WRITES=1 (bench/allocation-writes)")
	}
	k := 50
	if v, err := strconv.Atoi(os.Getenv("AW_WRITES_K")); err == nil && v > 0 {
		k = v
	}
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	admission := cp.StartWebhook(t, harness.WebhookOptions{Name: "admission", Args: []string{"--crd-accepts-allocating=true"}})
	cp.RegisterWebhooks(t, admission, harness.RegisterOptions{})
	// The resolver with its default leader-election timing, so the leases counted are what a
	// cluster pays.
	res := cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: []string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver, "--crd-accepts-allocating=true",
	}})
	res.WaitLeader(t, 30*time.Second)
	ns := cp.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	admin := fastDynamic(t, cp, harness.Admin)
	allocator := fastDynamic(t, cp, harness.AgonesController)
	sdkCfg := rest.CopyConfig(cp.SDK(t, ns).Config)
	sdkCfg.QPS, sdkCfg.Burst = 5000, 5000
	sdk, err := dynamic.NewForConfig(sdkCfg)
	if err != nil {
		t.Fatal(err)
	}
	metricsClient := cp.Clientset(t, harness.Admin)
	gsc := admin.Resource(harness.GameServerGVR).Namespace(ns)

	// Every game server's readiness probe answers 200: each one is loaded when it confirms.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }))
	}()
	httpPort := int64(ln.Addr().(*net.TCPAddr).Port)

	gated := make([]string, k)
	plain := make([]string, k)
	for i := 0; i < k; i++ {
		gated[i] = fmt.Sprintf("gated-%03d", i)
		plain[i] = fmt.Sprintf("plain-%03d", i)
	}
	all := append(append([]string{}, gated...), plain...)
	parallel(t, 16, all, func(name string) error {
		optIn := strings.HasPrefix(name, "gated-")
		var gs *unstructured.Unstructured
		if optIn {
			gs = harness.NewGameServer(name, true, harness.TimeoutKey, "60s",
				harness.ProbePortKey, "http", harness.ProbePathKey, "/ready")
		} else {
			gs = harness.NewGameServer(name, false)
		}
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
	})
	// Let the resolver's cache and the setup's writes settle before the first scrape.
	time.Sleep(2 * time.Second)

	var allocPuts, allocEvents, sdkPatches atomic.Int64
	allocate := func(name string) (*unstructured.Unstructured, error) {
		got, err := harness.AllocateLikeAgonesWith(ctx, allocator, ns, name, harness.Allocation{NoEvent: true})
		allocPuts.Add(1)
		if err != nil {
			return nil, err
		}
		// The allocator's Event (Agones records it after every successful allocation).
		allocEvents.Add(1)
		if err := harness.RecordEvent(ctx, allocator, got, "Normal", harness.State(got), "Allocated",
			harness.AllocatorEventComponent); err != nil {
			return nil, err
		}
		return got, nil
	}
	// The SDK sidecar's SetAnnotation, one attempt at a time so that every PATCH sent is counted
	// (a conflict is retried after re-reading, as the sidecar's queue does).
	confirm := func(name, id string) error {
		for attempt := 0; attempt < 50; attempt++ {
			sdkPatches.Add(1)
			_, err := harness.SDKSetAnnotation(ctx, sdk, ns, name, "allocating-ready", id)
			if err == nil {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("%s: SetAnnotation failed 50 times", name)
	}
	// settled waits until the resolver's Event recorder has sent everything it accepted (its
	// allocating_webhook_kube_events_total stops moving for 2 s; Events go out at 5/s after a burst
	// of 25).
	eventsSent := func() string {
		_, body, err := res.Get("/metrics")
		if err != nil {
			return ""
		}
		var b strings.Builder
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "allocating_webhook_kube_events_total") {
				b.WriteString(l + "\n")
			}
		}
		return b.String()
	}
	settled := func() string {
		last, stable := eventsSent(), 0
		for i := 0; i < 120 && stable < 10; i++ {
			time.Sleep(200 * time.Millisecond)
			if cur := eventsSent(); cur == last {
				stable++
			} else {
				last, stable = cur, 0
			}
		}
		return last
	}

	// Phase 1: K gated allocations, each confirmed at once by its SDK; done when every one is
	// Allocated with outcome Confirmed.
	before := scrape(ctx, t, metricsClient)
	t0 := time.Now()
	parallel(t, 16, gated, func(name string) error {
		got, err := allocate(name)
		if err != nil {
			return err
		}
		if harness.State(got) != "Allocating" {
			return fmt.Errorf("%s: not held: %s", name, harness.Describe(got))
		}
		return confirm(name, harness.Annotation(got, harness.AllocationKey))
	})
	if !harness.Poll(60*time.Second, 200*time.Millisecond, func() bool {
		l, err := gsc.List(ctx, metav1.ListOptions{LabelSelector: harness.EnabledLabel + "=true"})
		if err != nil {
			return false
		}
		n := 0
		for i := range l.Items {
			if harness.State(&l.Items[i]) == "Allocated" && harness.Annotation(&l.Items[i], harness.OutcomeKey) == "Confirmed" {
				n++
			}
		}
		return n == k
	}) {
		t.Fatalf("not every gated server was promoted within 60 s")
	}
	resolverEvents := settled()
	mid := scrape(ctx, t, metricsClient)
	gatedWindow := time.Since(t0)
	gatedAlloc, gatedSDK, gatedAllocEv := allocPuts.Load(), sdkPatches.Load(), allocEvents.Load()

	// Phase 2: K ungated allocations (the webhook admits them as they are; nothing follows).
	t1 := time.Now()
	parallel(t, 16, plain, func(name string) error {
		got, err := allocate(name)
		if err != nil {
			return err
		}
		if harness.State(got) != "Allocated" {
			return fmt.Errorf("%s: %s", name, harness.Describe(got))
		}
		return nil
	})
	// The same settling as the gated phase, so both windows pay the same background writes.
	settled()
	after := scrape(ctx, t, metricsClient)
	plainWindow := time.Since(t1)
	plainAlloc, plainAllocEv := allocPuts.Load()-gatedAlloc, allocEvents.Load()-gatedAllocEv

	per := func(v float64) float64 { return float64(int(v/float64(k)*1000+0.5)) / 1000 }
	phase := func(b, a counts, window time.Duration, allocWrites, sdkWrites, allocEv int64) map[string]interface{} {
		gs, gsVerbs := delta(b, a, "gameservers")
		ev, evVerbs := delta(b, a, "events")
		leases, _ := delta(b, a, "leases")
		resolverGS := gs - float64(allocWrites) - float64(sdkWrites)
		resolverEv := ev - float64(allocEv)
		other := 0.0
		for key, v := range a {
			r := key[:strings.LastIndexByte(key, '/')]
			if r != "gameservers" && r != "events" && r != "leases" {
				other += v - b[key]
			}
		}
		total := gs + ev
		return map[string]interface{}{
			"window_seconds":                  window.Seconds(),
			"gameserver_writes":               gs,
			"gameserver_writes_by_verb":       gsVerbs,
			"event_writes":                    ev,
			"event_writes_by_verb":            evVerbs,
			"lease_writes_in_window":          leases,
			"lease_writes_per_second":         leases / window.Seconds(),
			"other_writes_in_window":          other,
			"per_allocation_allocator_update": per(float64(allocWrites)),
			"per_allocation_sdk_annotation":   per(float64(sdkWrites)),
			"per_allocation_resolver_writes":  per(resolverGS),
			"per_allocation_allocator_events": per(float64(allocEv)),
			"per_allocation_resolver_events":  per(resolverEv),
			"per_allocation_events":           per(ev),
			"per_allocation_total":            per(total),
		}
	}
	g := phase(before, mid, gatedWindow, gatedAlloc, gatedSDK, gatedAllocEv)
	u := phase(mid, after, plainWindow, plainAlloc, 0, plainAllocEv)
	summary := map[string]interface{}{
		"k":                           k,
		"gated":                       g,
		"ungated":                     u,
		"gated_over_ungated":          g["per_allocation_total"].(float64) / u["per_allocation_total"].(float64),
		"resolver_events_metric":      eventResults(resolverEvents),
		"writes_counted":              "apiserver_request_total, verbs POST/PUT/PATCH/DELETE/APPLY",
		"per_allocation_total_counts": "gameservers + events writes (leases apart)",
	}
	js, _ := json.Marshal(summary)
	fmt.Printf("ALLOCATION_WRITES %s\n", js)
	if out := os.Getenv("AW_WRITES_OUT"); out != "" {
		_ = os.WriteFile(out, js, 0o644)
	}
	// Sanity: every gated allocation promoted once, no ungated one touched by the resolver.
	if rg := g["per_allocation_resolver_writes"].(float64); rg < 1 {
		t.Errorf("gated: %.3f resolver writes per allocation, want at least the promotion", rg)
	}
	if ru := u["per_allocation_resolver_writes"].(float64); ru != 0 {
		t.Errorf("ungated: %.3f resolver writes per allocation, want 0", ru)
	}
}

// eventResults maps the result label of allocating_webhook_kube_events_total lines to their values.
func eventResults(lines string) map[string]float64 {
	m := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		_, rest, ok := strings.Cut(l, `result="`)
		if !ok {
			continue
		}
		result, value, _ := strings.Cut(rest, `"} `)
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			m[result] = v
		}
	}
	return m
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

func parallel(t *testing.T, workers int, names []string, f func(string) error) {
	ch := make(chan string)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ch {
				if err := f(n); err != nil {
					t.Errorf("%s: %v", n, err)
				}
			}
		}()
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}
