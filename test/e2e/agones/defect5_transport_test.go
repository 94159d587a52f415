package agones

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

// Defect 5: the resolver's pooled API connections are closed by the server while idle; the next
// burst of promotions must all succeed at once, with no "transport error" in the log. kube-apiserver
// closes idle keep-alive connections after a fixed 90s (no flag), so the resolver talks to it
// through harness.APIProxy, which does exactly the same after 1s.
func TestDefect5_PooledConnectionsClosedWhileIdle(t *testing.T) {
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	proxy := cp.StartAPIProxy(t, time.Second)
	wh := cp.StartWebhook(t, harness.WebhookOptions{Name: "webhook-via-proxy", Args: harness.ResolverArgsFor(cp.KubeconfigVia(t, proxy))})
	cp.RegisterWebhooks(t, wh, harness.RegisterOptions{})
	ns := cp.Namespace(t)
	e := env{cp: cp, ns: ns, wh: wh, sdk: cp.SDK(t, ns)}
	wh.WaitLeader(t, 20*time.Second)

	const n = 8
	round := func(r int) {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("idle-%d-%d", r, i)
			e.ready(t, names[i], nil, harness.TimeoutKey, "30s")
			e.allocate(t, names[i], harness.Allocation{})
		}
		// All 8 confirm at once: the resolver promotes them concurrently.
		var wg sync.WaitGroup
		for _, name := range names {
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				if _, err := standin.ConfirmReady(harness.Ctx(t), e.sdk.Dyn, e.ns, name); err != nil {
					t.Errorf("SDK confirm %s: %v", name, err)
				}
			}(name)
		}
		wg.Wait()
		confirmed := time.Now()
		for _, name := range names {
			e.waitState(t, name, "Allocated", 5*time.Second)
		}
		t.Logf("round %d: %d promotions in %v (proxy: %d connections opened, %d closed)", r, n,
			time.Since(confirmed).Round(time.Millisecond), proxy.Opened.Load(), proxy.Closed.Load())
	}
	round(1) // the resolver's pool now holds several connections
	closedBefore := proxy.Closed.Load()
	time.Sleep(3 * time.Second) // idle: the proxy closes them, as kube-apiserver does after 90s
	if proxy.Closed.Load() == closedBefore {
		t.Errorf("no pooled connection was closed while idle: the scenario did not happen (proxy: %d opened, %d closed)",
			proxy.Opened.Load(), proxy.Closed.Load())
	}
	round(2)
	// The client saw what happened: the closed pooled connections were dropped before use (or, when
	// the close raced the request, the request was re-sent on a new connection).
	m := wh.Metrics(t)
	dropped := harness.MetricValue(m, `allocating_webhook_kube_pooled_connections_dropped_total{reason="closed"}`)
	retried := harness.MetricValue(m, "allocating_webhook_kube_request_retries_total")
	if (dropped == "" || dropped == "0") && (retried == "" || retried == "0") {
		t.Errorf("the webhook's metrics show no dropped or retried pooled connection (dropped %q, retried %q)", dropped, retried)
	}
	t.Logf("kube client: %s pooled connections dropped as closed, %s requests retried", dropped, retried)
	if logs := wh.Logs(); strings.Contains(logs, "transport error") {
		var lines []string
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "transport error") {
				lines = append(lines, l)
			}
		}
		t.Errorf("the webhook logged transport errors after its idle connections were closed:\n%s", strings.Join(lines, "\n"))
	}
}
