// Package threads is issue 25's thread-count figure as a benchmark-style end-to-end run (opt-in:
// set AW_THREAD_COUNT=1; bench/threads does): one replica serving admission and leading the
// resolver, on a real kube-apiserver, at default flags (and again with --autoscale-buffer). Once it
// leads and has been idle for a few seconds, it prints the process's thread count
// (/proc/PID/task) and its resident memory (VmRSS), and, while 64 opted-in GameServers are created
// and allocated, the highest thread count seen (a burst must not add threads).
package threads

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

// procThreads is the number of threads of pid (entries of /proc/PID/task).
func procThreads(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// procRSS is VmRSS of pid in MiB.
func procRSS(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v / 1024
		}
	}
	return -1
}

func TestThreadCount(t *testing.T) {
	if os.Getenv("AW_THREAD_COUNT") == "" {
		t.Skip("benchmark-style run: set AW_THREAD_COUNT=1 (bench/threads)")
	}
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	configs := []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"autoscale-buffer", []string{"--autoscale-buffer"}},
	}
	results := map[string]map[string]interface{}{}
	for _, c := range configs {
		args := append([]string{"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver,
			"--crd-accepts-allocating=true"}, c.args...)
		wh := cp.StartWebhook(t, harness.WebhookOptions{Name: "replica-" + c.name, Args: args, Wait: "readyz"})
		cp.RegisterWebhooks(t, wh, harness.RegisterOptions{})
		wh.WaitLeader(t, 30*time.Second)
		time.Sleep(3 * time.Second) // idle: informers synced, watches open, nothing to do
		idle := procThreads(wh.Pid())
		rss := procRSS(wh.Pid())
		if idle <= 0 {
			t.Fatalf("%s: cannot read /proc/%d/task", c.name, wh.Pid())
		}

		// A small burst of allocations: the thread count is sampled all along.
		peak := idle
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
					if n := procThreads(wh.Pid()); n > peak {
						peak = n
					}
				}
			}
		}()
		ns := cp.Namespace(t)
		admin := cp.Dynamic(t, harness.Admin)
		allocator := cp.Dynamic(t, harness.AgonesController)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		const n = 64
		var awg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("gs-%s-%d", c.name, i)
			gs := harness.NewGameServer(name, true, harness.TimeoutKey, "2s")
			gsc := admin.Resource(harness.GameServerGVR).Namespace(ns)
			created, err := gsc.Create(ctx, gs, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
			// Ready, as Agones makes it before an allocation can happen (its port: nothing listens).
			_ = unstructured.SetNestedField(created.Object, "Ready", "status", "state")
			_ = unstructured.SetNestedField(created.Object, "127.0.0.1", "status", "address")
			_ = unstructured.SetNestedSlice(created.Object, []interface{}{
				map[string]interface{}{"name": "default", "port": int64(9)}}, "status", "ports")
			if _, err := gsc.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("ready %s: %v", name, err)
			}
			awg.Add(1)
			go func() {
				defer awg.Done()
				if _, err := harness.AllocateLikeAgonesWith(ctx, allocator, ns, name, harness.Allocation{NoEvent: true}); err != nil {
					errs <- err
				}
			}()
		}
		awg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%s: allocate: %v", c.name, err)
		}
		time.Sleep(4 * time.Second) // every one reaches its 2 s deadline and is resolved
		close(stop)
		wg.Wait()
		cancel()
		after := procThreads(wh.Pid())
		results[c.name] = map[string]interface{}{
			"threads_idle":       idle,
			"threads_peak_burst": peak,
			"threads_after":      after,
			"rss_idle_mib":       rss,
			"flags":              strings.Join(c.args, " "),
		}
		t.Logf("%s: %d threads idle, %d at most during %d allocations, %.1f MiB RSS idle", c.name, idle, peak, n, rss)
		_ = wh.Stop(syscall.SIGTERM)
		cp.UnregisterWebhooks(t)
	}
	js, _ := json.MarshalIndent(results, "", "  ")
	fmt.Printf("THREADS %s\n", js)
	if out := os.Getenv("AW_THREADS_OUT"); out != "" {
		_ = os.WriteFile(out, js, 0o644)
	}
}
