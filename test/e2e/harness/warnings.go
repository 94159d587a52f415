package harness

import (
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Warnings records the HTTP "Warning" headers kube-apiserver returns (admission webhooks' warnings
// reach clients this way).
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(code int, agent string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	w.msgs = append(w.msgs, text)
	w.mu.Unlock()
}

// All returns the warnings received so far.
func (w *Warnings) All() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// Contains reports whether any warning contains substr.
func (w *Warnings) Contains(substr string) bool {
	for _, m := range w.All() {
		if strings.Contains(m, substr) {
			return true
		}
	}
	return false
}

// Reset forgets the warnings received so far.
func (w *Warnings) Reset() {
	w.mu.Lock()
	w.msgs = nil
	w.mu.Unlock()
}

// DynamicWithWarnings is a dynamic client for identity that records response warnings.
func (cp *ControlPlane) DynamicWithWarnings(t testing.TB, identity string) (dynamic.Interface, *Warnings) {
	t.Helper()
	w := &Warnings{}
	cfg := cp.RESTConfig(t, identity)
	cfg.WarningHandler = w
	var _ rest.WarningHandler = w
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}
