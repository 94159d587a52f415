// Package gatewaychaos is issue 23's chaos run: N allocations (500 in bench/gateway-chaos; 40 as
// a smoke run in the e2e suite) through two allocation-gateway replicas, REST and gRPC mixed,
// every request with an idempotency key; 20% of the attempts are abandoned by their client at a
// random moment and retried with the same key; one replica is SIGKILLed and one rolled (SIGTERM,
// a new one started) mid-run; clients whose replica went away retry on another with the same
// key. Game servers confirm 0.2–2 s after they are held. Then, once every request's deadline +
// 10 s has passed, the invariant is checked on the API server:
//   - 0 GameServers left Allocating or Allocated without a delivered answer (every such server
//     carries `delivered` and was answered to a client);
//   - every server answered to a client is Allocated with `confirmed` = its allocation (outcome
//     Confirmed);
//   - 0 keys with more than one server (answered, or still Allocating/Allocated).
//
// Prints `RESULT gateway-chaos ...` and fails when any count is not 0.
package gatewaychaos

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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
	"github.com/agones-allocating-webhook/e2e/harness"
	"github.com/agones-allocating-webhook/e2e/standin"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	requestDeadline = 6 * time.Second
	maxTries        = 6
)

// replica is one running gateway with its clients.
type replica struct {
	name string
	gw   *harness.Webhook
	rest *http.Client
	conn *grpc.ClientConn
	dead atomic.Bool
}

type run struct {
	t        *testing.T
	cp       *harness.ControlPlane
	ns       string
	admin    dynamic.Interface
	sdk      dynamic.Interface
	alloc    *harness.AllocatorStandin
	clientCA *harness.TestCA
	mu       sync.Mutex
	replicas []*replica
	started  int

	delivered map[string]string // key -> server answered 200 (first answer)
	dupAnswer atomic.Int64      // a key answered with two different servers
	attempts  atomic.Int64
	abandoned atomic.Int64
	lostConn  atomic.Int64
	noServer  atomic.Int64
	failed    atomic.Int64 // keys never answered 200 within maxTries
	grpcCalls atomic.Int64
}

func TestGatewayChaos(t *testing.T) {
	n := 40
	if os.Getenv("AW_GATEWAY_CHAOS") != "" {
		n = 500
	}
	if v, err := strconv.Atoi(os.Getenv("AW_GATEWAY_CHAOS_N")); err == nil && v > 0 {
		n = v
	}
	cp := harness.Setup(t)
	cp.AddAllocatingToEnum(t)
	r := &run{t: t, cp: cp, delivered: map[string]string{}}
	r.admin = cp.Dynamic(t, harness.Admin)
	wh := cp.StartWebhook(t, harness.WebhookOptions{Name: "resolver", Args: []string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=" + harness.Resolver,
		"--crd-accepts-allocating=true", "--resync-period=5s", "--log-level=info",
	}})
	cp.RegisterWebhooks(t, wh, harness.RegisterOptions{})
	wh.WaitLeader(t, 20*time.Second)
	r.alloc = cp.StartAllocatorStandinWith(t, harness.AllocatorStandinOptions{Cached: true})
	r.clientCA = harness.NewTestCA(t, filepath.Join(cp.Dir, "chaos-clients"), "matchmaker-ca")
	r.ns = cp.Namespace(t)
	r.sdk = cp.SDK(t, r.ns).Dyn
	r.startReplica()
	r.startReplica()

	servers := n*2 + 20
	r.createServers(servers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.gameServers(ctx)

	start := time.Now()
	keys := make(chan int)
	var wg sync.WaitGroup
	var done atomic.Int64
	killAt, rollAt := int64(n*3/10), int64(n*6/10)
	var killOnce, rollOnce sync.Once
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
			for i := range keys {
				r.allocate(rng, i)
				d := done.Add(1)
				if d >= killAt {
					killOnce.Do(func() { go r.kill() })
				}
				if d >= rollAt {
					rollOnce.Do(func() { go r.roll() })
				}
			}
		}(w)
	}
	for i := 0; i < n; i++ {
		keys <- i
	}
	close(keys)
	wg.Wait()
	clientsDone := time.Since(start)
	// Every request's deadline + 10 s: what was not delivered must be released by then.
	time.Sleep(requestDeadline + 10*time.Second)
	r.check(n, clientsDone)
}

func (r *run) startReplica() {
	r.mu.Lock()
	r.started++
	name := fmt.Sprintf("gateway-%d", r.started)
	r.mu.Unlock()
	gw := r.cp.StartWebhook(r.t, harness.WebhookOptions{
		Name: name, Binary: harness.GatewayBinary(), Wait: "readyz",
		NoDefaults: []string{"trusted-users", "agones-controller-users"},
		Args: []string{
			"--kubeconfig=" + r.cp.Kubeconfig, "--context=" + harness.User,
			"--client-ca-file=" + r.clientCA.CAFile,
			"--allocator-address=" + r.alloc.URL, "--allocator-ca-file=" + r.alloc.CAFile,
			"--allocator-client-cert-file=" + r.alloc.ClientCert, "--allocator-client-key-file=" + r.alloc.ClientKey,
			"--deadline=" + requestDeadline.String(), "--shutdown-grace=3s", "--log-level=debug",
		},
	})
	crt, key := r.clientCA.Issue(r.t, name+"-client", "director", false)
	tlsConf := harness.ClientTLS(r.t, gw.CAFile, crt, key)
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", gw.Port), grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { conn.Close() })
	rep := &replica{name: name, gw: gw, rest: harness.HTTPSClient(r.t, gw.CAFile, crt, key), conn: conn}
	r.mu.Lock()
	r.replicas = append(r.replicas, rep)
	r.mu.Unlock()
}

func (r *run) live() []*replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*replica
	for _, rep := range r.replicas {
		if !rep.dead.Load() {
			out = append(out, rep)
		}
	}
	return out
}

// kill SIGKILLs the first live replica and starts a new one.
func (r *run) kill() {
	reps := r.live()
	if len(reps) == 0 {
		return
	}
	reps[0].dead.Store(true)
	reps[0].gw.Kill()
	r.t.Logf("SIGKILLed %s", reps[0].name)
	r.startReplica()
}

// roll: a rolling update of one replica: the new one starts, the old one gets SIGTERM.
func (r *run) roll() {
	reps := r.live()
	if len(reps) == 0 {
		return
	}
	old := reps[len(reps)-1]
	r.startReplica()
	old.dead.Store(true)
	_ = old.gw.Signal(syscall.SIGTERM)
	r.t.Logf("rolled %s (SIGTERM)", old.name)
}

// allocate: one logical allocation with key i: attempts until a 200 (or maxTries).
func (r *run) allocate(rng *rand.Rand, i int) {
	key := fmt.Sprintf("chaos-%d", i)
	for try := 0; try < maxTries; try++ {
		reps := r.live()
		if len(reps) == 0 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rep := reps[rng.Intn(len(reps))]
		// 20% of the attempts are given up by their client at a random moment.
		budget := requestDeadline + 2*time.Second
		abandon := rng.Float64() < 0.2
		if abandon {
			budget = time.Duration(100+rng.Intn(2900)) * time.Millisecond
		}
		r.attempts.Add(1)
		var name string
		var status int
		var err error
		if i%2 == 0 {
			name, status, err = r.rest(rep, key, budget)
		} else {
			r.grpcCalls.Add(1)
			name, status, err = r.grpc(rep, key, budget)
		}
		switch {
		case err != nil && abandon:
			r.abandoned.Add(1)
			continue
		case err != nil:
			r.lostConn.Add(1)
			time.Sleep(100 * time.Millisecond)
			continue
		case status == 200:
			r.mu.Lock()
			if prev, ok := r.delivered[key]; ok && prev != name {
				r.dupAnswer.Add(1)
				r.t.Errorf("key %s answered with %s and then %s", key, prev, name)
			} else if !ok {
				r.delivered[key] = name
			}
			r.mu.Unlock()
			return
		default:
			r.noServer.Add(1)
		}
	}
	r.failed.Add(1)
}

func (r *run) rest(rep *replica, key string, budget time.Duration) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rep.gw.URL("/gameserverallocation"),
		bytes.NewBufferString(fmt.Sprintf(`{"namespace":%q}`, r.ns)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(harness.IdempotencyHeader, key)
	res, err := rep.rest.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return "", 0, err
	}
	var body struct {
		GameServerName string `json:"gameServerName"`
	}
	_ = json.Unmarshal(raw, &body)
	return body.GameServerName, res.StatusCode, nil
}

func (r *run) grpc(rep *replica, key string, budget time.Duration) (string, int, error) {
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(),
		metadata.Pairs(strings.ToLower(harness.IdempotencyHeader), key)), budget)
	defer cancel()
	res, err := pb.NewAllocationServiceClient(rep.conn).Allocate(ctx, &pb.AllocationRequest{Namespace: r.ns})
	if err != nil {
		if ctx.Err() != nil {
			return "", 0, err // the client gave up (abandoned), or the replica never answered
		}
		msg := err.Error()
		if strings.Contains(msg, "ResourceExhausted") {
			return "", 429, nil
		}
		if strings.Contains(msg, "shutting down") {
			return "", 503, nil
		}
		return "", 0, err
	}
	return res.GameServerName, 200, nil
}

// gameServers confirms each server 0.2–2 s after it is held, as a game server that loads its match.
func (r *run) gameServers(ctx context.Context) {
	seen := map[string]string{}
	for ctx.Err() == nil {
		w, err := r.admin.Resource(harness.GameServerGVR).Namespace(r.ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || harness.State(u) != "Allocating" {
				continue
			}
			id := harness.Annotation(u, harness.AllocationKey)
			if id == "" || seen[u.GetName()] == id {
				continue
			}
			seen[u.GetName()] = id
			name := u.GetName()
			delay := time.Duration(200+rand.Intn(1800)) * time.Millisecond
			go func() {
				time.Sleep(delay)
				_ = standin.SetAnnotation(ctx, r.sdk, r.ns, name, "allocating-ready", id)
			}()
		}
	}
}

func (r *run) createServers(n int) {
	t0 := time.Now()
	_, errs := harness.CreateReadyMany(context.Background(), r.admin, r.ns, "gs", n, 16, harness.TimeoutKey, "8s")
	for _, err := range errs {
		r.t.Error(err)
	}
	if !harness.Poll(60*time.Second, 20*time.Millisecond, func() bool { return r.alloc.CachedReady(r.ns) >= n }) {
		r.t.Fatalf("the stand-in allocator's cache has %d of %d Ready servers", r.alloc.CachedReady(r.ns), n)
	}
	r.t.Logf("%d Ready GameServers in %v", n, time.Since(t0).Round(time.Millisecond))
}

func (r *run) check(n int, clientsDone time.Duration) {
	list, err := r.admin.Resource(harness.GameServerGVR).Namespace(r.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	answered := map[string]string{} // server -> key
	r.mu.Lock()
	for k, s := range r.delivered {
		answered[s] = k
	}
	r.mu.Unlock()
	byKey := map[string]map[string]bool{}
	var leftUndelivered, badDelivered, released, untouched int
	for i := range list.Items {
		u := &list.Items[i]
		name, st := u.GetName(), harness.State(u)
		if key := harness.Annotation(u, harness.RequestKeyKey); key != "" && (st == "Allocating" || st == "Allocated") {
			if byKey[key] == nil {
				byKey[key] = map[string]bool{}
			}
			byKey[key][name] = true
		}
		if harness.Annotation(u, harness.OutcomeKey) == "Undelivered" {
			released++
		}
		if st == "Ready" {
			untouched++
		}
		_, wasAnswered := answered[name]
		if (st == "Allocating" || st == "Allocated") && (!wasAnswered || harness.Annotation(u, harness.DeliveredKey) == "") {
			leftUndelivered++
			r.t.Errorf("left %s without a delivered answer: %s", name, harness.Describe(u))
		}
		if wasAnswered && (st != "Allocated" || harness.Annotation(u, harness.ConfirmedKey) == "" ||
			harness.Annotation(u, harness.ConfirmedKey) != harness.Annotation(u, harness.AllocationKey)) {
			badDelivered++
			r.t.Errorf("answered %s is not Allocated and confirmed: %s", name, harness.Describe(u))
		}
	}
	dupKeys := int(r.dupAnswer.Load())
	for k, s := range byKey {
		if len(s) > 1 {
			dupKeys++
			r.t.Errorf("key %s holds %d servers: %v", k, len(s), s)
		}
		if want, ok := r.delivered[k]; ok && !s[want] {
			r.t.Errorf("key %s: its answered server %s is not the one holding it (%v)", k, want, s)
		}
	}
	fmt.Printf("RESULT gateway-chaos n=%d answered=%d failed=%d attempts=%d abandoned=%d lost_connections=%d no_server=%d grpc_attempts=%d released_undelivered=%d left_undelivered=%d delivered_not_confirmed=%d duplicate_keys=%d ready_left=%d clients=%v target: left_undelivered=0 delivered_not_confirmed=0 duplicate_keys=0\n",
		n, len(r.delivered), r.failed.Load(), r.attempts.Load(), r.abandoned.Load(), r.lostConn.Load(), r.noServer.Load(),
		r.grpcCalls.Load(), released, leftUndelivered, badDelivered, dupKeys, untouched, clientsDone.Round(time.Millisecond))
	if r.failed.Load() > 0 {
		r.t.Errorf("%d keys never got a server within %d attempts", r.failed.Load(), maxTries)
	}
}
