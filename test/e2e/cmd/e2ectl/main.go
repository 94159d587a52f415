// Command e2ectl registers the webhook configurations of manifests/ (through
// manifests/overlays/local and kustomize, like the e2e tests) against the control plane in
// $AW_E2E_DIR, pointing them at a webhook on 127.0.0.1. Used by scripts/up.
//
//	e2ectl register --port 8443 --ca build/e2e/webhook-certs/ca.crt [--failure-policy Fail|Ignore]
//	e2ectl unregister
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	dir := os.Getenv("AW_E2E_DIR")
	if dir == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			die(err)
		}
		dir = filepath.Join(root, "build", "e2e")
	}
	state, err := harness.ReadEnvFile(filepath.Join(dir, "state.env"))
	if err != nil {
		die(fmt.Errorf("no control plane in %s (scripts/controlplane up): %w", dir, err))
	}
	kubectl := func(stdin string, args ...string) {
		cmd := exec.Command(state["KUBECTL"], append([]string{"--kubeconfig", state["KUBECONFIG"], "--context", "admin"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			die(fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err))
		}
	}
	switch os.Args[1] {
	case "register":
		fs := flag.NewFlagSet("register", flag.ExitOnError)
		port := fs.Int("port", 8443, "webhook HTTPS port on 127.0.0.1")
		ca := fs.String("ca", "", "CA certificate of the webhook's serving certificate (caBundle)")
		fp := fs.String("failure-policy", "", "Fail or Ignore (default: as in manifests/)")
		overlay := fs.String("overlay", "", "kustomize directory (default manifests/overlays/local)")
		_ = fs.Parse(os.Args[2:])
		if *ca == "" {
			die(fmt.Errorf("register: --ca is required"))
		}
		out, err := harness.RenderWebhookConfigs(state["KUBECTL"], dir, *port, *ca,
			harness.RegisterOptions{FailurePolicy: *fp, Overlay: *overlay})
		if err != nil {
			die(err)
		}
		kubectl(out, "apply", "-f", "-")
	case "unregister":
		kubectl("", "delete", "--ignore-not-found", "mutatingwebhookconfiguration/allocating-webhook",
			"validatingwebhookconfiguration/allocating-webhook")
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: e2ectl register --port P --ca FILE [--failure-policy Fail|Ignore] | e2ectl unregister")
	os.Exit(2)
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "e2ectl:", err)
	os.Exit(1)
}
