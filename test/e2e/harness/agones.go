package harness

// Stand-ins for the writes Agones v1.56 makes to GameServers, written to match Agones' own code
// (see HARNESS.md "Agones stand-ins" for the source files each one was checked against). They send
// the same verb, the same kind of body and the same fields as Agones does, so that admission sees
// what it sees in a real cluster; which identity writes is the caller's choice of client (the
// allocator runs as AgonesAllocator or, for the GameServerAllocation API, AgonesController; the
// GameServerSet controller as AgonesController; the SDK sidecar as the namespace's own service
// account, ControlPlane.SDK).

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// EventGVR is core/v1 events (the resource client-go's event recorder writes).
var EventGVR = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// Event source components Agones records with.
const (
	AllocatorEventComponent     = "GameServerAllocation-Allocator" // pkg/gameserverallocations/allocator.go
	GameServerSetEventComponent = "gameserverset-controller"       // pkg/gameserversets/controller.go
)

// Allocation is what a GameServerAllocation (or a REST/gRPC AllocationRequest) asks of the server
// it picks: spec.metadata (REST: metadata) labels and annotations to merge, and optionally the
// counter/list actions of spec.counters/spec.lists, applied by Mutate to the object before the
// UPDATE (Agones applies them in the same UPDATE, CountsAndLists is on by default in 1.56).
type Allocation struct {
	Labels      map[string]string
	Annotations map[string]string
	Mutate      func(gs *unstructured.Unstructured) error
	// NoEvent skips the Event the allocator records after a successful update.
	NoEvent bool
}

// AllocateLikeAgones is Agones' allocator applying an allocation to one chosen GameServer
// (Allocator.applyAllocationToGameServer): it takes the server (Agones takes its informer-cache
// copy; the harness GETs it), merges the allocation's labels (only when the allocation has a labels
// map) and annotations into it, sets agones.dev/last-allocated to time.Now() as RFC 3339 with
// nanoseconds (Go's Time.MarshalText: trailing zeros of the fraction dropped; UTC in Agones'
// distroless images), sets status.state=Allocated, and sends ONE full UPDATE (PUT) of the whole
// object. On success it records the allocator's Event, whose reason is the state of the object the
// API server returned (so "Allocating" for a gated server) and whose message is "Allocated". It
// returns the object kube-apiserver answered with: Agones puts exactly that object back into its
// allocation cache and copies its labels/annotations into the GameServerAllocation's
// status.metadata. On error Agones puts an empty GameServer back into its cache (the cache
// poisoning of issue 9); the harness just returns the error.
func AllocateLikeAgones(ctx context.Context, dyn dynamic.Interface, ns, name string, labels, annotations map[string]string) (*unstructured.Unstructured, error) {
	return AllocateLikeAgonesWith(ctx, dyn, ns, name, Allocation{Labels: labels, Annotations: annotations})
}

// AllocateLikeAgonesWith is AllocateLikeAgones with the whole Allocation.
func AllocateLikeAgonesWith(ctx context.Context, dyn dynamic.Interface, ns, name string, a Allocation) (*unstructured.Unstructured, error) {
	c := dyn.Resource(GameServerGVR).Namespace(ns)
	gs, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ApplyAllocation(gs, a.Labels, a.Annotations, time.Now())
	if a.Mutate != nil {
		if err := a.Mutate(gs); err != nil {
			return nil, err
		}
	}
	got, err := c.Update(ctx, gs, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	if !a.NoEvent {
		// Agones' recorder is asynchronous and never fails the allocation: neither does this.
		_ = RecordEvent(ctx, dyn, got, "Normal", State(got), "Allocated", AllocatorEventComponent)
	}
	return got, nil
}

// ApplyAllocation changes gs in memory the way the allocator does before its UPDATE: labels merged
// when the allocation has any, annotations merged, agones.dev/last-allocated = now, state Allocated.
func ApplyAllocation(gs *unstructured.Unstructured, labels, annotations map[string]string, now time.Time) {
	if labels != nil {
		l := gs.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		gs.SetLabels(l)
	}
	ann := gs.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range annotations {
		ann[k] = v
	}
	ann[LastAllocatedKey] = AgonesTimestamp(now)
	gs.SetAnnotations(ann)
	_ = unstructured.SetNestedField(gs.Object, "Allocated", "status", "state")
}

// AgonesTimestamp formats t as Agones writes agones.dev/last-allocated (time.Time.MarshalText:
// RFC 3339 with nanoseconds, trailing zeros dropped), in UTC as in Agones' containers.
func AgonesTimestamp(t time.Time) string {
	b, _ := t.UTC().MarshalText()
	return string(b)
}

// ShutdownLikeGameServerSet is the GameServerSet controller deleting one GameServer on scale-down
// or during a rolling update (Controller.deleteGameServers): it does not DELETE, it copies the
// server it has (Agones: its informer-cache copy; the harness GETs it), sets status.state=Shutdown
// and sends one full UPDATE. Agones ignores the returned object: on success it marks the server
// deleted in its local state cache and records a SuccessfulDelete Event on the GameServerSet; on
// error it aborts the pass (no status update) and retries the GameServerSet. gssName, when not
// empty, names the GameServerSet the Event is recorded on (it must exist in ns).
func ShutdownLikeGameServerSet(ctx context.Context, dyn dynamic.Interface, ns, name, gssName string) (*unstructured.Unstructured, error) {
	c := dyn.Resource(GameServerGVR).Namespace(ns)
	gs, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	was := State(gs)
	cp := gs.DeepCopy()
	_ = unstructured.SetNestedField(cp.Object, "Shutdown", "status", "state")
	got, err := c.Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("error updating gameserver %s from status %s to Shutdown status: %w", name, was, err)
	}
	if gssName != "" {
		if gss, gerr := dyn.Resource(GameServerSetGVR).Namespace(ns).Get(ctx, gssName, metav1.GetOptions{}); gerr == nil {
			_ = RecordEvent(ctx, dyn, gss, "Normal", "SuccessfulDelete",
				fmt.Sprintf("Deleted gameserver in state %s: %v", was, name), GameServerSetEventComponent)
		}
	}
	return got, nil
}

// RecordEvent writes a core/v1 Event about obj the way client-go's event recorder does (name
// <object>.<hex nanoseconds>, source component, first/last timestamp, count 1).
func RecordEvent(ctx context.Context, dyn dynamic.Interface, obj *unstructured.Unstructured, eventType, reason, message, component string) error {
	now := time.Now()
	ts := now.UTC().Format(time.RFC3339)
	ev := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata": map[string]interface{}{
			"name":      fmt.Sprintf("%s.%x", obj.GetName(), now.UnixNano()),
			"namespace": obj.GetNamespace(),
		},
		"involvedObject": map[string]interface{}{
			"apiVersion":      obj.GetAPIVersion(),
			"kind":            obj.GetKind(),
			"namespace":       obj.GetNamespace(),
			"name":            obj.GetName(),
			"uid":             string(obj.GetUID()),
			"resourceVersion": obj.GetResourceVersion(),
		},
		"reason":         reason,
		"message":        message,
		"type":           eventType,
		"source":         map[string]interface{}{"component": component},
		"firstTimestamp": ts,
		"lastTimestamp":  ts,
		"count":          int64(1),
	}}
	_, err := dyn.Resource(EventGVR).Namespace(obj.GetNamespace()).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// SDKGet reads the GameServer the way the SDK sidecar does: its informer lists and watches with a
// metadata.name field selector (Agones' SDK role grants list/watch/patch, not get).
func SDKGet(ctx context.Context, dyn dynamic.Interface, ns, name string) (*unstructured.Unstructured, error) {
	list, err := dyn.Resource(GameServerGVR).Namespace(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("gameserver %s/%s not found", ns, name)
	}
	return &list.Items[0], nil
}

// SDKPatch does what the Agones SDK sidecar does: a JSON patch whose first operation tests
// /metadata/resourceVersion against the object it has read (SDKGet), followed by ops.
func SDKPatch(ctx context.Context, dyn dynamic.Interface, ns, name string, ops ...map[string]interface{}) (*unstructured.Unstructured, error) {
	gs, err := SDKGet(ctx, dyn, ns, name)
	if err != nil {
		return nil, err
	}
	return sdkPatchFrom(ctx, dyn, gs, ops...)
}

func sdkPatchFrom(ctx context.Context, dyn dynamic.Interface, gs *unstructured.Unstructured, ops ...map[string]interface{}) (*unstructured.Unstructured, error) {
	all := append([]map[string]interface{}{
		{"op": "test", "path": "/metadata/resourceVersion", "value": gs.GetResourceVersion()},
	}, ops...)
	body, err := json.Marshal(all)
	if err != nil {
		return nil, err
	}
	return dyn.Resource(GameServerGVR).Namespace(gs.GetNamespace()).Patch(ctx, gs.GetName(), types.JSONPatchType, body, metav1.PatchOptions{})
}

// annotationOps are the operations the sidecar's diff (jsonpatch.CreatePatch of the object before
// and after) produces for setting annotations: the whole map added when there is none, else add
// for a new key and replace for a changed one (nothing for an unchanged one).
func annotationOps(gs *unstructured.Unstructured, kv map[string]string) []map[string]interface{} {
	cur := gs.GetAnnotations()
	if cur == nil {
		m := map[string]interface{}{}
		for k, v := range kv {
			m[k] = v
		}
		return []map[string]interface{}{{"op": "add", "path": "/metadata/annotations", "value": m}}
	}
	var ops []map[string]interface{}
	for k, v := range kv {
		old, ok := cur[k]
		switch {
		case !ok:
			ops = append(ops, map[string]interface{}{"op": "add", "path": "/metadata/annotations/" + EscapeJSONPointer(k), "value": v})
		case old != v:
			ops = append(ops, map[string]interface{}{"op": "replace", "path": "/metadata/annotations/" + EscapeJSONPointer(k), "value": v})
		}
	}
	return ops
}

// SDKSetState is the sidecar's state write (SDK Allocate(): Allocated, Shutdown(): Shutdown,
// Ready(): RequestReady, Reserve(): Reserved): test resourceVersion, replace /status/state; for
// Allocated it also sets agones.dev/last-allocated to now in the same patch, as the sidecar does.
func SDKSetState(ctx context.Context, dyn dynamic.Interface, ns, name, state string) (*unstructured.Unstructured, error) {
	gs, err := SDKGet(ctx, dyn, ns, name)
	if err != nil {
		return nil, err
	}
	ops := []map[string]interface{}{{"op": "replace", "path": "/status/state", "value": state}}
	if state == "Allocated" {
		ops = append(ops, annotationOps(gs, map[string]string{LastAllocatedKey: AgonesTimestamp(time.Now())})...)
	}
	return sdkPatchFrom(ctx, dyn, gs, ops...)
}

// SDKSetAnnotation is the SDK's SetAnnotation(key, value): it writes agones.dev/sdk-<key>. (The real
// sidecar queues it behind its request rate limit, 500ms by default; the harness writes at once.)
func SDKSetAnnotation(ctx context.Context, dyn dynamic.Interface, ns, name, key, value string) (*unstructured.Unstructured, error) {
	gs, err := SDKGet(ctx, dyn, ns, name)
	if err != nil {
		return nil, err
	}
	return sdkPatchFrom(ctx, dyn, gs, annotationOps(gs, map[string]string{"agones.dev/sdk-" + key: value})...)
}

// SDKSetLabel is the SDK's SetLabel(key, value): it writes the label agones.dev/sdk-<key>.
func SDKSetLabel(ctx context.Context, dyn dynamic.Interface, ns, name, key, value string) (*unstructured.Unstructured, error) {
	gs, err := SDKGet(ctx, dyn, ns, name)
	if err != nil {
		return nil, err
	}
	k := "agones.dev/sdk-" + key
	var op map[string]interface{}
	switch cur, ok := gs.GetLabels()[k]; {
	case gs.GetLabels() == nil:
		op = map[string]interface{}{"op": "add", "path": "/metadata/labels", "value": map[string]interface{}{k: value}}
	case !ok:
		op = map[string]interface{}{"op": "add", "path": "/metadata/labels/" + EscapeJSONPointer(k), "value": value}
	case cur != value:
		op = map[string]interface{}{"op": "replace", "path": "/metadata/labels/" + EscapeJSONPointer(k), "value": value}
	}
	if op == nil {
		return sdkPatchFrom(ctx, dyn, gs)
	}
	return sdkPatchFrom(ctx, dyn, gs, op)
}
