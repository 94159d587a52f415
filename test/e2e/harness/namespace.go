package harness

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Agones resources (agones.dev/v1) and the CRD resource.
var (
	GameServerGVR    = schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "gameservers"}
	FleetGVR         = schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "fleets"}
	GameServerSetGVR = schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "gameserversets"}
	CRDGVR           = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

var nsCounter atomic.Int64

// Namespace creates a fresh namespace for the test and removes it (and the Agones objects in it) at
// the end. There is no kube-controller-manager, so the namespace is finalized directly.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	cs := cp.Clientset(t, Admin)
	base := strings.ToLower(t.Name())
	base = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, base)
	if len(base) > 40 {
		base = base[:40]
	}
	name := fmt.Sprintf("e2e-%s-%d-%d", strings.Trim(base, "-"), time.Now().Unix()%100000, nsCounter.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { cp.deleteNamespace(t, name) })
	return name
}

func (cp *ControlPlane) deleteNamespace(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dyn := cp.Dynamic(t, Admin)
	for _, gvr := range []schema.GroupVersionResource{FleetGVR, GameServerSetGVR, GameServerGVR} {
		err := dyn.Resource(gvr).Namespace(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("cleanup: delete %s in %s: %v", gvr.Resource, name, err)
		}
	}
	cs := cp.Clientset(t, Admin)
	if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Logf("cleanup: delete namespace %s: %v", name, err)
		return
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	ns.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Logf("cleanup: finalize namespace %s: %v", name, err)
	}
}
