package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// RegisterOptions select how the webhook configurations from manifests/ are registered.
type RegisterOptions struct {
	// Overlay is the kustomize directory whose webhooks call a URL (default manifests/overlays/local).
	Overlay string
	// FailurePolicy "Fail" or "Ignore" sets every webhook's failurePolicy; "" keeps the manifests'.
	FailurePolicy string
	// TimeoutSeconds > 0 sets every webhook's timeoutSeconds; 0 keeps the manifests'.
	TimeoutSeconds int
	// NoWait returns right after `kubectl apply`. Otherwise RegisterWebhooks waits until
	// kube-apiserver calls the webhook (a dry-run CREATE of an opted-in GameServer with an invalid
	// timeout annotation is refused), which needs the webhook to be running.
	NoWait bool
}

const (
	webhookConfigName = "allocating-webhook"
	defaultOverlay    = "overlays/local"
)

var renderSeq atomic.Int64

// RenderWebhookConfigs renders the overlay through kubectl kustomize with a generated layer on top
// that points every webhook's clientConfig.url at https://127.0.0.1:port<path of the overlay's url>
// with caBundle = the PEM in caFile (and the options). The result is the YAML to apply: the
// manifests users install, with only clientConfig (and optionally failurePolicy/timeoutSeconds)
// changed.
func RenderWebhookConfigs(kubectl, workDir string, port int, caFile string, opts RegisterOptions) (string, error) {
	overlay := opts.Overlay
	if overlay == "" {
		overlay = filepath.Join(ManifestsDir(), defaultOverlay)
	}
	overlay, err := filepath.Abs(overlay)
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return "", fmt.Errorf("caBundle: %w", err)
	}
	base, err := kustomize(kubectl, overlay)
	if err != nil {
		return "", err
	}
	docs, err := splitYAML(base)
	if err != nil {
		return "", err
	}
	type target struct {
		kind string
		ops  []map[string]interface{}
	}
	var targets []target
	for _, d := range docs {
		kind, _ := d["kind"].(string)
		if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
			continue
		}
		meta, _ := d["metadata"].(map[string]interface{})
		if name, _ := meta["name"].(string); name != webhookConfigName {
			return "", fmt.Errorf("%s: unexpected %s %q", overlay, kind, name)
		}
		hooks, _ := d["webhooks"].([]interface{})
		tg := target{kind: kind}
		for i, h := range hooks {
			hm, _ := h.(map[string]interface{})
			cc, _ := hm["clientConfig"].(map[string]interface{})
			u, _ := cc["url"].(string)
			if _, hasService := cc["service"]; hasService || u == "" {
				return "", fmt.Errorf("%s: %s webhook %d: clientConfig must have url and no service", overlay, kind, i)
			}
			parsed, err := url.Parse(u)
			if err != nil {
				return "", fmt.Errorf("%s: webhook %d url %q: %w", kind, i, u, err)
			}
			tg.ops = append(tg.ops, map[string]interface{}{
				"op": "replace", "path": fmt.Sprintf("/webhooks/%d/clientConfig", i),
				"value": map[string]interface{}{
					"url":      fmt.Sprintf("https://127.0.0.1:%d%s", port, parsed.Path),
					"caBundle": base64.StdEncoding.EncodeToString(ca),
				},
			})
			if opts.FailurePolicy != "" {
				tg.ops = append(tg.ops, map[string]interface{}{
					"op": "replace", "path": fmt.Sprintf("/webhooks/%d/failurePolicy", i), "value": opts.FailurePolicy,
				})
			}
			if opts.TimeoutSeconds > 0 {
				tg.ops = append(tg.ops, map[string]interface{}{
					"op": "replace", "path": fmt.Sprintf("/webhooks/%d/timeoutSeconds", i), "value": opts.TimeoutSeconds,
				})
			}
		}
		targets = append(targets, tg)
	}
	if len(targets) != 2 {
		return "", fmt.Errorf("%s: want one Mutating and one ValidatingWebhookConfiguration, got %d", overlay, len(targets))
	}
	dir := filepath.Join(workDir, fmt.Sprintf("register-%d-%d", os.Getpid(), renderSeq.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	rel, err := filepath.Rel(dir, overlay)
	if err != nil {
		return "", err
	}
	var patches []interface{}
	for _, tg := range targets {
		ops, err := yaml.Marshal(tg.ops)
		if err != nil {
			return "", err
		}
		patches = append(patches, map[string]interface{}{
			"target": map[string]interface{}{
				"group": "admissionregistration.k8s.io", "kind": tg.kind, "name": webhookConfigName,
			},
			"patch": string(ops),
		})
	}
	k, err := yaml.Marshal(map[string]interface{}{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{rel},
		"patches":    patches,
	})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
		return "", err
	}
	return kustomize(kubectl, dir)
}

func kustomize(kubectl, dir string) (string, error) {
	var so, se bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl kustomize %s: %v: %s", dir, err, se.String())
	}
	return so.String(), nil
}

func splitYAML(s string) ([]map[string]interface{}, error) {
	var out []map[string]interface{}
	for _, part := range strings.Split("\n"+s, "\n---\n") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var m map[string]interface{}
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// RegisterWebhooks registers the manifests' webhook configurations pointing at w (see
// RegisterOptions) and removes them at the end of the test.
func (cp *ControlPlane) RegisterWebhooks(t testing.TB, w *Webhook, opts RegisterOptions) {
	t.Helper()
	cp.RegisterWebhooksAt(t, w.Port, w.CAFile, opts)
}

// RegisterWebhooksAt is RegisterWebhooks for a port and CA (e.g. a webhook that is not running).
// Registering again (e.g. with another failurePolicy) updates the configurations in place.
func (cp *ControlPlane) RegisterWebhooksAt(t testing.TB, port int, caFile string, opts RegisterOptions) {
	t.Helper()
	rendered, err := RenderWebhookConfigs(cp.KubectlPath, cp.Dir, port, caFile, opts)
	if err != nil {
		t.Fatalf("render webhook configurations: %v", err)
	}
	if so, se, err := cp.Kubectl(Admin, rendered, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply webhook configurations: %v\n%s%s", err, so, se)
	}
	t.Cleanup(func() { cp.UnregisterWebhooks(t) })
	if !opts.NoWait {
		cp.WaitWebhookCalled(t, 20*time.Second)
	}
}

// UnregisterWebhooks deletes both webhook configurations (no error when absent).
func (cp *ControlPlane) UnregisterWebhooks(t testing.TB) {
	t.Helper()
	_, se, err := cp.Kubectl(Admin, "", "delete", "--ignore-not-found", "--wait=false",
		"mutatingwebhookconfiguration/"+webhookConfigName, "validatingwebhookconfiguration/"+webhookConfigName)
	if err != nil {
		t.Errorf("unregister webhooks: %v: %s", err, se)
	}
}

// WaitWebhookCalled waits until kube-apiserver calls the validating webhook: a server-side dry-run
// CREATE of an opted-in GameServer with an invalid allocating.agones.dev/timeout is refused with a
// message that names the key.
func (cp *ControlPlane) WaitWebhookCalled(t testing.TB, timeout time.Duration) {
	t.Helper()
	gs := NewGameServer("webhook-probe", true, TimeoutKey, "not-a-duration")
	dyn := cp.Dynamic(t, Admin).Resource(GameServerGVR).Namespace("default")
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		_, err := dyn.Create(context.Background(), gs, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), TimeoutKey) {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver does not call the webhook %v after registration (last dry-run result: %v)", timeout, last)
}
