package harness

// The stand-in allocator's cached mode (AllocatorStandinOptions.Cached), for load runs such as
// bench/gateway: like agones-allocator, it picks from a watch-fed cache of GameServers (Agones:
// the allocation cache fed by its informer) instead of a LIST per request, and allocations run
// concurrently (Agones: a batch of updates in parallel), each server reserved while its UPDATE is
// in flight. The write is the same: ApplyAllocation on the cached copy, one full UPDATE (a stale
// copy is a 409 and the next candidate is tried, as Agones does), then the allocator's Event
// (asynchronous, as Agones' recorder). Everything else (both faces, gRPC and REST, the request's
// checks, the answer) is allocator.go's, shared with the default mode.

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
)

// AllocatorStandinOptions configures StartAllocatorStandinWith.
type AllocatorStandinOptions struct {
	// Cached: pick from a watch-fed cache and allocate concurrently (see allocator_cached.go);
	// false: a LIST per request and one allocation at a time (StartAllocatorStandin).
	Cached bool
	// Plain: serve plain HTTP (agones-allocator started with --disable-tls); URL is http://.
	Plain bool
	// ServingSANs: the names in its serving certificate (default 127.0.0.1 and localhost), e.g.
	// only a Service name that the address dialled does not carry.
	ServingSANs []string
}

type allocatorCache struct {
	dyn      dynamic.Interface // AgonesAllocator, high QPS: the cache's watch and the stand-in's writes
	mu       sync.Mutex
	byNS     map[string]map[string]*unstructured.Unstructured
	reserved map[string]bool // ns/name with an UPDATE in flight
	synced   chan struct{}
}

func rvOf(u *unstructured.Unstructured) int64 {
	v, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return v
}

// startAllocatorCache lists and watches every GameServer as AgonesAllocator until the test ends;
// it returns once the first list is in.
func startAllocatorCache(t testing.TB, cp *ControlPlane) *allocatorCache {
	t.Helper()
	cfg := cp.RESTConfig(t, AgonesAllocator)
	cfg.Timeout = 0                 // a watch outlives the harness's 30 s request timeout (writes: a context deadline)
	cfg.QPS, cfg.Burst = 5000, 5000 // Agones' allocator runs with high client limits too
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &allocatorCache{dyn: dyn, byNS: map[string]map[string]*unstructured.Unstructured{}, reserved: map[string]bool{},
		synced: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		gsc := dyn.Resource(GameServerGVR)
		first := true
		for ctx.Err() == nil {
			list, err := gsc.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			c.mu.Lock()
			c.byNS = map[string]map[string]*unstructured.Unstructured{}
			for i := range list.Items {
				c.putLocked(&list.Items[i])
			}
			c.mu.Unlock()
			if first {
				close(c.synced)
				first = false
			}
			w, err := gsc.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true})
			if err != nil {
				continue
			}
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					c.mu.Lock()
					c.putLocked(u)
					c.mu.Unlock()
				case watch.Deleted:
					c.mu.Lock()
					delete(c.byNS[u.GetNamespace()], u.GetName())
					c.mu.Unlock()
				}
			}
			w.Stop()
		}
	}()
	select {
	case <-c.synced:
	case <-time.After(30 * time.Second):
		t.Fatal("stand-in allocator: GameServer cache not synced within 30s")
	}
	return c
}

// putLocked stores u unless the cache already holds a newer version (the stand-in stores its own
// UPDATE's answer before the watch delivers it).
func (c *allocatorCache) putLocked(u *unstructured.Unstructured) {
	m := c.byNS[u.GetNamespace()]
	if m == nil {
		m = map[string]*unstructured.Unstructured{}
		c.byNS[u.GetNamespace()] = m
	}
	if old := m[u.GetName()]; old != nil && rvOf(old) > rvOf(u) {
		return
	}
	m[u.GetName()] = u
}

// take reserves the first (by name) Ready, not deleting, not reserved GameServer of ns matching
// one of the selectors and returns a copy to write; nil when there is none.
func (c *allocatorCache) take(ns string, sels []*pb.GameServerSelector) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *unstructured.Unstructured
	for name, gs := range c.byNS[ns] {
		if State(gs) != "Ready" || gs.GetDeletionTimestamp() != nil || c.reserved[ns+"/"+name] {
			continue
		}
		if best != nil && best.GetName() < name {
			continue
		}
		if selected(gs, sels) {
			best = gs
		}
	}
	if best == nil {
		return nil
	}
	c.reserved[ns+"/"+best.GetName()] = true
	return best.DeepCopy()
}

// release ends a reservation; got, when not nil, is the UPDATE's answer (stored at once).
func (c *allocatorCache) release(ns, name string, got *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reserved, ns+"/"+name)
	if got != nil {
		c.putLocked(got)
	}
}

// allocateCached: the cached mode's allocation (a reserved candidate from the cache, one full
// UPDATE; a conflict tries the next one, as Agones' batch does), then the allocator's Event.
func (a *AllocatorStandin) allocateCached(ctx context.Context, ns string, sels []*pb.GameServerSelector, alloc Allocation) (*unstructured.Unstructured, error) {
	for attempt := 0; attempt < 5; attempt++ {
		gs := a.cache.take(ns, sels)
		if gs == nil {
			return nil, errNoServer
		}
		ApplyAllocation(gs, alloc.Labels, alloc.Annotations, time.Now())
		got, err := a.cache.dyn.Resource(GameServerGVR).Namespace(ns).Update(ctx, gs, metav1.UpdateOptions{})
		a.cache.release(ns, gs.GetName(), got)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		go func() {
			ectx, ecancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer ecancel()
			_ = RecordEvent(ectx, a.cache.dyn, got, "Normal", State(got), "Allocated", AllocatorEventComponent)
		}()
		return got, nil
	}
	return nil, errNoServer
}

// CachedReady is the number of Ready GameServers of ns in the cached stand-in's cache (what it
// can allocate now; the cache follows the API server through a watch). 0 when not Cached.
func (a *AllocatorStandin) CachedReady(ns string) int {
	if a.cache == nil {
		return 0
	}
	a.cache.mu.Lock()
	defer a.cache.mu.Unlock()
	n := 0
	for _, gs := range a.cache.byNS[ns] {
		if State(gs) == "Ready" {
			n++
		}
	}
	return n
}
