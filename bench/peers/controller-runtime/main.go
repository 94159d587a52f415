// Command controller-runtime-peer is the benchmark's controller-runtime peer: a mutating webhook for
// Agones GameServers written the way kubebuilder writes one (sigs.k8s.io/controller-runtime's
// webhook.Server and admission.Webhook, a patch computed with admission.PatchResponseFromRaw). It makes
// the allocating webhook's decision for a new allocation of an opted-in server (rule 2 of
// docs/design.md "Admission decisions", mode rewrite): status.state Allocated becomes Allocating, with the `since`
// and `allocation` annotations. It exists only to be measured next to the C++ webhook by
// scripts/bench; it is not a second implementation of the project.
//
//	controller-runtime-peer --port 9443 --cert-dir DIR   (DIR holds tls.crt and tls.key)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const (
	enabledLabel  = "allocating.agones.dev/enabled"
	sinceKey      = "allocating.agones.dev/since"
	allocationKey = "allocating.agones.dev/allocation"
	lastAllocated = "agones.dev/last-allocated"
)

type gate struct{}

func state(obj map[string]any) string {
	status, _ := obj["status"].(map[string]any)
	s, _ := status["state"].(string)
	return s
}

func (gate) Handle(_ context.Context, req admission.Request) admission.Response {
	var obj, old map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	meta, _ := obj["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	if labels[enabledLabel] != "true" {
		return admission.Allowed("not opted in")
	}
	o, n := state(old), state(obj)
	if n != "Allocated" || o == "Allocated" || o == "Allocating" {
		return admission.Allowed("not a new allocation")
	}
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
		meta["annotations"] = annotations
	}
	since := time.Now().UTC().Format(time.RFC3339Nano)
	id, _ := annotations[lastAllocated].(string)
	if id == "" {
		id = since
	}
	annotations[sinceKey] = since
	annotations[allocationKey] = id
	obj["status"].(map[string]any)["state"] = "Allocating"
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

func main() {
	port := flag.Int("port", 9443, "HTTPS port")
	certDir := flag.String("cert-dir", ".", "directory with tls.crt and tls.key")
	flag.Parse()

	srv := webhook.NewServer(webhook.Options{
		Host:     "127.0.0.1",
		Port:     *port,
		CertDir:  *certDir,
		CertName: "tls.crt",
		KeyName:  "tls.key",
	})
	srv.Register("/mutate/gameservers", &webhook.Admission{Handler: gate{}})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Start(ctx); err != nil {
		os.Stderr.WriteString("controller-runtime-peer: " + err.Error() + "\n")
		os.Exit(1)
	}
}
