// Package cachescale is issue 33's cache figures on the real control plane (opt-in: set
// AW_CACHE_SCALE=1; bench/cache-scale/real does): the real allocating-webhook (leading the
// resolver) and the real allocation-gateway (syncing its cache; the stand-in allocator behind it
// is never called) against the harness's kube-apiserver, with N opted-in GameServers
// (AW_CACHE_SCALE_N, default 20000) shaped like Agones' (test/fixtures/objects/
// gameserver-allocating-sdk-ready.json moved to Ready; kube-apiserver does not keep the
// managedFields a client sends on create, so each server is written by three managers: created by
// "controller", annotated by "agones-allocator", made Ready by "sdk-server"). It reports, for each process: RSS and
// threads idle (caches synced, empty) and synced with N cached, the cache's own estimate
// (allocating_webhook_kube_informer_bytes), RSS per server beyond idle, idle CPU over 20 s with N
// cached, and a forced full re-list (kube-apiserver restarted after the etcd revision moved on, so
// the resumed watch gets 410): peak RSS (sampled every 100 ms) over synced RSS and how long until
// the re-list was applied. One CACHE_SCALE JSON line on stdout, also written to
// $AW_CACHE_SCALE_OUT.
//
// Without AW_CACHE_SCALE the test skips and TestMain does not even start the package's control
// plane (the default test/e2e/run stays free of it). The N GameServers are left in a namespace of
// this package's own control plane, which harness.Main / test/e2e/run tear down (deleting 20k
// objects with Agones' finalizer would cost minutes): do not point AW_E2E_DIR at a shared one.
package cachescale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/agones-allocating-webhook/e2e/harness"
)

const enableEnv = "AW_CACHE_SCALE"

// TestMain starts the package's control plane only for the opt-in run: skipped, the package
// costs no etcd/kube-apiserver start-up.
func TestMain(m *testing.M) {
	if os.Getenv(enableEnv) == "" {
		os.Exit(m.Run())
	}
	harness.Main(m)
}

// The informer names of the two binaries' GameServer caches (webhook/kube/gameserver_cache.h,
// webhook/gateway/io/cache.cc).
const (
	webhookInformer = "gameservers"
	gatewayInformer = "gateway-gameservers"
)

type proc struct {
	name     string
	informer string
	w        *harness.Webhook
}

func TestCacheScale(t *testing.T) {
	if os.Getenv(enableEnv) == "" {
		t.Skip("benchmark-style run: set " + enableEnv + "=1 (bench/cache-scale/real)")
	}
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("AW_CACHE_SCALE_N")); err == nil && v > 0 {
		n = v
	}
	load0 := loadAvg()
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()

	// The webhook leading the resolver (its GameServer cache runs), as resolverburst starts it,
	// with the binary's own resync period. No admission registration: the creates below go
	// straight to etcd, and the process's figures are its cache's, not admission traffic's.
	wh := cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: []string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver, "--crd-accepts-allocating=true",
		"--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms", "--log-level=info",
	}})
	wh.WaitLeader(t, 20*time.Second)
	// The gateway: it needs an allocator address; the stand-in is never called here.
	alloc := cp.StartAllocatorStandin(t)
	clientCA := harness.NewTestCA(t, filepath.Join(cp.Dir, "cachescale-clients"), "matchmaker-ca")
	gw := cp.StartGateway(t, alloc, clientCA.CAFile, "--log-level=info")
	procs := []proc{{"webhook", webhookInformer, wh}, {"gateway", gatewayInformer, gw}}

	// Idle: both caches synced and empty.
	for _, p := range procs {
		waitObjects(t, p, 0, time.Minute)
	}
	time.Sleep(2 * time.Second)
	type figures struct {
		IdleRSS, IdleThreads                     float64
		SyncedRSS, SyncedThreads, SyncedHWM      float64
		GaugeObjects, GaugeBytes                 float64
		IdleCPUPercent                           float64
		RelistPeakRSS, RelistSeconds             float64
		ExpiredAfterReady, ListSeconds           float64
		RelistLogged                             bool
		ExpiredRestarts0, ExpiredRestarts1       float64
		TransportRestarts0, TransportRestarts1   float64
		ObjectsMinDuringRelist, ObjectsBackAfter float64
	}
	fig := map[string]*figures{}
	for _, p := range procs {
		rss, _ := procMem(p.w.Pid())
		fig[p.name] = &figures{IdleRSS: rss, IdleThreads: float64(procThreads(p.w.Pid()))}
		t.Logf("%s idle: RSS %.1f MiB, %d threads", p.name, rss, procThreads(p.w.Pid()))
	}

	admin := fastDynamic(t, cp, harness.Admin)
	ns := fmt.Sprintf("cachescale-%d", time.Now().Unix()%100000)
	if _, err := cp.Clientset(t, harness.Admin).CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gsc := admin.Resource(harness.GameServerGVR).Namespace(ns)
	tmpl := template(t)

	// Does kube-apiserver keep the managedFields a client sends on create? One probe object
	// carrying the fixture's two managers and the allocator's.
	probe := shaped(tmpl, "cachescale-probe", 0)
	probe.SetManagedFields(clientManagedFields(t))
	got, err := gsc.Create(ctx, probe, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create probe: %v", err)
	}
	probeManagers := managerNames(got)
	keptAll := hasManagers(got, "controller", "sdk-server", "agones-allocator")
	if keptAll {
		t.Logf("kube-apiserver kept the client's three managedFields entries on create: %v", probeManagers)
	} else {
		// The create's own manager owns every field the body sets: an entry whose fields the
		// object holds loses them and disappears. So each server below is written by three
		// managers, as Agones' are over their life.
		t.Logf("kube-apiserver did NOT keep the client's three managedFields entries on create (stored: %v); "+
			"each server is therefore written by three managers (3 writes)", probeManagers)
	}
	if err := gsc.Delete(ctx, "cachescale-probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// It has Agones' finalizer: drop it so that the probe is really gone (the caches count N).
	if err := removeFinalizers(ctx, gsc, "cachescale-probe"); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		waitObjects(t, p, 0, time.Minute)
	}

	// Create N in parallel; print the rate.
	var created atomic.Int64
	t0 := time.Now()
	progress := make(chan struct{})
	// (the progress line counts servers with all their writes done)
	go func() {
		for {
			select {
			case <-progress:
				return
			case <-time.After(15 * time.Second):
				c := created.Load()
				t.Logf("created %d/%d (%.0f/s), webhook cache %v, gateway cache %v", c, n,
					float64(c)/time.Since(t0).Seconds(), gauge(wh, "allocating_webhook_kube_informer_objects", webhookInformer),
					gauge(gw, "allocating_webhook_kube_informer_objects", gatewayInformer))
			}
		}
	}()
	workers := 48
	if v, err := strconv.Atoi(os.Getenv("AW_CACHE_SCALE_WORKERS")); err == nil && v > 0 {
		workers = v
	}
	var failed atomic.Int64
	parallel(workers, n, func(i int) {
		name := fmt.Sprintf("xonotic-8k2vq-%05d", i)
		for attempt := 0; ; attempt++ {
			err := writeServer(ctx, gsc, tmpl, name, i)
			if err == nil {
				created.Add(1)
				return
			}
			if attempt == 4 || ctx.Err() != nil {
				if failed.Add(1) <= 5 {
					t.Errorf("create %s: %v", name, err)
				}
				return
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
	})
	close(progress)
	createDur := time.Since(t0)
	if failed.Load() > 0 {
		t.Fatalf("%d creates failed", failed.Load())
	}
	rate := float64(n) / createDur.Seconds()
	t.Logf("created %d GameServers in %v (%.0f/s, %d API writes each: %.0f writes/s)", n,
		createDur.Round(time.Millisecond), rate, writesPerServer, rate*writesPerServer)
	sample, err := gsc.Get(ctx, "xonotic-8k2vq-00000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	managers := managerNames(sample)
	stored, _ := json.Marshal(sample.Object)
	var mfBytes int
	if mf, ok := sample.Object["metadata"].(map[string]interface{})["managedFields"]; ok {
		b, _ := json.Marshal(mf)
		mfBytes = len(b)
	}
	t.Logf("one GameServer as kube-apiserver serves it: %d bytes of JSON (managedFields %d: %v)", len(stored), mfBytes, managers)

	// Synced with N: both gauges at N.
	syncWait := time.Now()
	for _, p := range procs {
		waitObjects(t, p, float64(n), 5*time.Minute)
	}
	t.Logf("both caches hold %d (%.1f s after the last create)", n, time.Since(syncWait).Seconds())
	time.Sleep(5 * time.Second) // the last events' garbage settles
	for _, p := range procs {
		f := fig[p.name]
		f.SyncedRSS, f.SyncedHWM = procMem(p.w.Pid())
		f.SyncedThreads = float64(procThreads(p.w.Pid()))
		f.GaugeObjects = gauge(p.w, "allocating_webhook_kube_informer_objects", p.informer)
		f.GaugeBytes = gauge(p.w, "allocating_webhook_kube_informer_bytes", p.informer)
		t.Logf("%s synced: RSS %.1f MiB (peak so far %.1f), %v threads, cache %v objects %.1f MiB (gauge)",
			p.name, f.SyncedRSS, f.SyncedHWM, f.SyncedThreads, f.GaugeObjects, f.GaugeBytes/(1<<20))
	}

	// Idle CPU with N cached, 20 s.
	cpu0 := map[string]float64{}
	for _, p := range procs {
		cpu0[p.name], _ = procCPU(p.w.Pid())
	}
	const idleWindow = 20 * time.Second
	time.Sleep(idleWindow)
	for _, p := range procs {
		c, _ := procCPU(p.w.Pid())
		fig[p.name].IdleCPUPercent = (c - cpu0[p.name]) / idleWindow.Seconds() * 100
	}

	// Forced full re-list. The informers resume a watch from the last resourceVersion they
	// applied; kube-apiserver's watch cache, rebuilt on restart from a list at etcd's current
	// revision, answers a resume from an older revision with 410, which makes them re-list. Move
	// etcd's revision past theirs first (writes to another kind: no GameServer event reaches them).
	for _, p := range procs {
		body := p.w.Metrics(t)
		fig[p.name].ExpiredRestarts0 = counter(body, "allocating_webhook_kube_watch_restarts_total", p.informer, "expired")
		fig[p.name].TransportRestarts0 = counter(body, "allocating_webhook_kube_watch_restarts_total", p.informer, "transport")
	}
	listedBefore := map[string]int{}
	for _, p := range procs {
		listedBefore[p.name] = len(listedLines(p.w.LogPath, p.informer))
	}
	cs := cp.Clientset(t, harness.Admin)
	for i := 0; i < 5; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bump-%d", i)}, Data: map[string]string{"i": "x"}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var peaks sync.Map // name -> float64
	var minObjects sync.Map
	sampling := make(chan struct{})
	var samplers sync.WaitGroup
	for _, p := range procs {
		p := p
		peaks.Store(p.name, 0.0)
		minObjects.Store(p.name, float64(n))
		samplers.Add(2)
		go func() { // RSS every 100 ms
			defer samplers.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sampling:
					return
				case <-tick.C:
					if r, _ := procMem(p.w.Pid()); r > 0 {
						if v, _ := peaks.Load(p.name); r > v.(float64) {
							peaks.Store(p.name, r)
						}
					}
				}
			}
		}()
		go func() { // the objects gauge every 250 ms
			defer samplers.Done()
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sampling:
					return
				case <-tick.C:
					if v := gauge(p.w, "allocating_webhook_kube_informer_objects", p.informer); v >= 0 {
						if m, _ := minObjects.Load(p.name); v < m.(float64) {
							minObjects.Store(p.name, v)
						}
					}
				}
			}
		}()
	}
	r0 := time.Now()
	cp.RestartAPIServer(t, nil)
	ready := time.Now()
	t.Logf("kube-apiserver restarted in %.1f s", ready.Sub(r0).Seconds())
	// Until each process logged a new "kube: listed" with N objects (or 3 min).
	deadline := time.Now().Add(3 * time.Minute)
	pending := map[string]bool{"webhook": true, "gateway": true}
	for len(pending) > 0 && time.Now().Before(deadline) {
		for _, p := range procs {
			if !pending[p.name] {
				continue
			}
			lines := listedLines(p.w.LogPath, p.informer)
			if len(lines) > listedBefore[p.name] {
				last := lines[len(lines)-1]
				f := fig[p.name]
				f.RelistLogged = true
				f.RelistSeconds = last.ts.Sub(ready).Seconds()
				// When its resumed watch got the 410 (the re-list's start): the rest is the list.
				f.ExpiredAfterReady, f.ListSeconds = -1, -1
				if exp := logLines(p.w.LogPath, p.informer, "kube: watch expired; re-listing"); len(exp) > 0 && exp[len(exp)-1].ts.After(r0) {
					f.ExpiredAfterReady = exp[len(exp)-1].ts.Sub(ready).Seconds()
					f.ListSeconds = last.ts.Sub(exp[len(exp)-1].ts).Seconds()
				}
				t.Logf("%s re-listed %d objects in %d pages, %.2f s after kube-apiserver was ready "+
					"(its watch got 410 at %.2f s; the list took %.2f s)", p.name, last.objects, last.pages,
					f.RelistSeconds, f.ExpiredAfterReady, f.ListSeconds)
				delete(pending, p.name)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range procs {
		if pending[p.name] {
			t.Logf("%s: no re-list within 3 min of the restart (its watch resumed?)", p.name)
		}
	}
	for _, p := range procs {
		waitObjects(t, p, float64(n), time.Minute)
		fig[p.name].ObjectsBackAfter = time.Since(ready).Seconds()
	}
	time.Sleep(2 * time.Second) // keep sampling a moment after the list applied
	close(sampling)
	samplers.Wait()
	for _, p := range procs {
		f := fig[p.name]
		v, _ := peaks.Load(p.name)
		f.RelistPeakRSS = v.(float64)
		m, _ := minObjects.Load(p.name)
		f.ObjectsMinDuringRelist = m.(float64)
		body := p.w.Metrics(t)
		f.ExpiredRestarts1 = counter(body, "allocating_webhook_kube_watch_restarts_total", p.informer, "expired")
		f.TransportRestarts1 = counter(body, "allocating_webhook_kube_watch_restarts_total", p.informer, "transport")
	}

	out := map[string]interface{}{
		"servers":                            n,
		"create_seconds":                     round(createDur.Seconds(), 1),
		"servers_per_second":                 round(rate, 0),
		"create_workers":                     workers,
		"object_json_bytes":                  len(stored),
		"object_managed_fields_bytes":        mfBytes,
		"object_managers":                    managers,
		"writes_per_server":                  writesPerServer,
		"create_keeps_client_managed_fields": keptAll,
		"create_probe_managers":              probeManagers,
		"apiserver_restart_seconds":          round(ready.Sub(r0).Seconds(), 2),
		"loadavg_start":                      load0,
		"loadavg_end":                        loadAvg(),
		"idle_cpu_window_seconds":            idleWindow.Seconds(),
		"webhook_resolver_leader":            wh.IsLeader(),
		"note_no_admission_registered": "the webhook process runs the resolver (leading) only; " +
			"admission is not registered, so creates do not pass through it",
	}
	for _, p := range procs {
		f := fig[p.name]
		perServer := (f.SyncedRSS - f.IdleRSS) * (1 << 20) / float64(n)
		out[p.name] = map[string]interface{}{
			"informer":                    p.informer,
			"idle_rss_mib":                round(f.IdleRSS, 1),
			"idle_threads":                f.IdleThreads,
			"synced_rss_mib":              round(f.SyncedRSS, 1),
			"synced_threads":              f.SyncedThreads,
			"hwm_after_create_mib":        round(f.SyncedHWM, 1),
			"gauge_objects":               f.GaugeObjects,
			"gauge_bytes":                 f.GaugeBytes,
			"gauge_bytes_per_server":      round(f.GaugeBytes/float64(n), 0),
			"rss_bytes_per_server":        round(perServer, 0),
			"idle_cpu_percent":            round(f.IdleCPUPercent, 2),
			"relist_logged":               f.RelistLogged,
			"relist_seconds_after_ready":  round(f.RelistSeconds, 2),
			"watch_410_after_ready":       round(f.ExpiredAfterReady, 2),
			"relist_list_seconds":         round(f.ListSeconds, 2),
			"objects_n_again_after_ready": round(f.ObjectsBackAfter, 2),
			"objects_min_during_relist":   f.ObjectsMinDuringRelist,
			"relist_peak_rss_mib":         round(f.RelistPeakRSS, 1),
			"relist_peak_over_synced":     round(f.RelistPeakRSS/f.SyncedRSS, 3),
			"watch_restarts_expired":      f.ExpiredRestarts1 - f.ExpiredRestarts0,
			"watch_restarts_transport":    f.TransportRestarts1 - f.TransportRestarts0,
		}
	}
	js, _ := json.Marshal(out)
	fmt.Printf("CACHE_SCALE %s\n", js)
	if path := os.Getenv("AW_CACHE_SCALE_OUT"); path != "" {
		_ = os.WriteFile(path, append(js, '\n'), 0o644)
	}
	for _, p := range procs {
		if !fig[p.name].RelistLogged {
			t.Errorf("%s did not re-list after the kube-apiserver restart", p.name)
		}
	}
}

// template is the body every created GameServer is a copy of: the fixture's labels, annotations
// (without the four an allocation adds; writeServer adds last-allocated back), owner, finalizer,
// spec and status (RequestReady: writeServer's last write makes it Ready), without managedFields
// (the writes make them).
func template(t *testing.T) map[string]interface{} {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "test", "fixtures", "objects", "gameserver-allocating-sdk-ready.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]interface{}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	meta := o["metadata"].(map[string]interface{})
	for _, k := range []string{"resourceVersion", "uid", "creationTimestamp", "namespace", "generation"} {
		delete(meta, k)
	}
	ann := meta["annotations"].(map[string]interface{})
	for _, k := range []string{harness.SinceKey, harness.AllocationKey, harness.SdkReadyKey, harness.LastAllocatedKey} {
		delete(ann, k)
	}
	delete(meta, "managedFields")
	st := o["status"].(map[string]interface{})
	st["state"] = "RequestReady"
	return o
}

// clientManagedFields are the fixture's two managers' entries plus the allocator's.
func clientManagedFields(t *testing.T) []metav1.ManagedFieldsEntry {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "test", "fixtures", "objects", "gameserver-allocating-sdk-ready.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	ts := metav1.NewTime(time.Date(2026, 12, 2, 14, 23, 13, 0, time.UTC))
	return append(o.Metadata.ManagedFields, metav1.ManagedFieldsEntry{
		Manager: "agones-allocator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "agones.dev/v1",
		Time: &ts, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:agones.dev/last-allocated":{}}},"f:status":{"f:state":{}}}`)},
	})
}

// writesPerServer: writeServer's API writes.
const writesPerServer = 3

// writeServer makes one server the way Agones' is over its life, one manager per write: the
// controller creates it (RequestReady, address and ports set), the allocator once allocated it
// (agones.dev/last-allocated: a server back to Ready after a match keeps it), the SDK sidecar
// moves it to Ready. Each write is retried from where it stopped by the caller (AlreadyExists on a
// retried create is taken as done).
func writeServer(ctx context.Context, c dynamic.ResourceInterface, tmpl map[string]interface{}, name string, i int) error {
	if _, err := c.Create(ctx, shaped(tmpl, name, i), metav1.CreateOptions{FieldManager: "controller"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	alloc := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, harness.LastAllocatedKey,
		time.Date(2026, 12, 2, 14, 23, 13, i, time.UTC).Format(time.RFC3339Nano))
	if _, err := c.Patch(ctx, name, types.MergePatchType, []byte(alloc), metav1.PatchOptions{FieldManager: "agones-allocator"}); err != nil {
		return err
	}
	_, err := c.Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"state":"Ready"}}`), metav1.PatchOptions{FieldManager: "sdk-server"})
	return err
}

func managerNames(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	return out
}

// shaped is a copy of tmpl named name, with per-server addresses, node and host ports.
func shaped(tmpl map[string]interface{}, name string, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: tmpl}
	u = u.DeepCopy()
	u.SetName(name)
	node := fmt.Sprintf("gke-agones-default-pool-3f2a1b0c-%04x", i/100)
	ip := fmt.Sprintf("10.128.%d.%d", (i/250)%250, i%250+2)
	port := int64(7000 + (i*2)%1000)
	st := u.Object["status"].(map[string]interface{})
	st["address"] = ip
	st["nodeName"] = node
	st["addresses"] = []interface{}{
		map[string]interface{}{"type": "InternalIP", "address": ip},
		map[string]interface{}{"type": "Hostname", "address": node},
		map[string]interface{}{"type": "PodIP", "address": fmt.Sprintf("10.8.%d.%d", (i/250)%250, i%250+2)},
	}
	st["ports"] = []interface{}{
		map[string]interface{}{"name": "default", "port": port},
		map[string]interface{}{"name": "admin", "port": port + 1},
	}
	ports := u.Object["spec"].(map[string]interface{})["ports"].([]interface{})
	ports[0].(map[string]interface{})["hostPort"] = port
	ports[1].(map[string]interface{})["hostPort"] = port + 1
	u.SetAnnotations(merge(u.GetAnnotations(), map[string]string{
		"agones.dev/ready-container-id": fmt.Sprintf("containerd://%064x", i),
	}))
	return u
}

func merge(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func hasManagers(u *unstructured.Unstructured, names ...string) bool {
	have := map[string]bool{}
	for _, e := range u.GetManagedFields() {
		have[e.Manager] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

func removeFinalizers(ctx context.Context, c dynamic.ResourceInterface, name string) error {
	u, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil // already gone
	}
	u.SetFinalizers(nil)
	_, err = c.Update(ctx, u, metav1.UpdateOptions{})
	return err
}

// waitObjects waits until p's GameServer informer holds want objects.
func waitObjects(t *testing.T, p proc, want float64, timeout time.Duration) {
	t.Helper()
	if !harness.Poll(timeout, 250*time.Millisecond, func() bool {
		return gauge(p.w, "allocating_webhook_kube_informer_objects", p.informer) == want
	}) {
		t.Fatalf("%s: informer %s holds %v objects, want %v", p.name, p.informer,
			gauge(p.w, "allocating_webhook_kube_informer_objects", p.informer), want)
	}
}

// gauge is metric{informer="informer"} from w's /metrics, -1 when absent or unreadable.
func gauge(w *harness.Webhook, metric, informer string) float64 {
	_, body, err := w.Get("/metrics")
	if err != nil {
		return -1
	}
	return series(body, metric, map[string]string{"informer": informer})
}

func counter(body, metric, informer, reason string) float64 {
	v := series(body, metric, map[string]string{"informer": informer, "reason": reason})
	if v < 0 {
		return 0
	}
	return v
}

// series finds metric{labels...} (every given label present, in any order) in a Prometheus text
// exposition; -1 when absent.
func series(body, metric string, labels map[string]string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		ok := true
		for k, v := range labels {
			if !strings.Contains(line[len(metric):end+1], k+`="`+v+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err == nil {
			return f
		}
	}
	return -1
}

type listed struct {
	ts             time.Time
	objects, pages int
}

// listedLines are the "kube: listed" log lines of informer in a JSON log.
func listedLines(path, informer string) []listed { return logLines(path, informer, "kube: listed") }

// logLines are the log lines of informer with message msg in a JSON log.
func logLines(path, informer, msg string) []listed {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []listed
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"`+msg+`"`) {
			continue
		}
		var r map[string]interface{}
		if json.Unmarshal([]byte(line), &r) != nil || r["informer"] != informer {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r["ts"]))
		if err != nil {
			continue
		}
		objects, _ := strconv.Atoi(fmt.Sprint(r["objects"]))
		pages, _ := strconv.Atoi(fmt.Sprint(r["pages"]))
		out = append(out, listed{ts: ts, objects: objects, pages: pages})
	}
	return out
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

func parallel(workers, n int, f func(i int)) {
	ch := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		ch <- i
	}
	close(ch)
	wg.Wait()
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

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}
