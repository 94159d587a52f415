// Command e2ectl drives the control plane in $AW_E2E_DIR for scripts/up (the playground):
//
//	e2ectl register --port 8443 --ca build/e2e/webhook-certs/ca.crt [--failure-policy Fail|Ignore]
//	e2ectl unregister
//	e2ectl allocator --env-file FILE
//	e2ectl client-ca --dir DIR --cn NAME
//
// register/unregister: the webhook configurations of manifests/ (through manifests/overlays/local
// and kustomize, like the e2e tests), pointed at a webhook on 127.0.0.1.
// allocator: the harness's stand-in agones-allocator (REST and gRPC on one mTLS port, allocating as
// the agones-allocator identity: harness/allocator.go) until SIGTERM/SIGINT; once it listens, FILE
// gets ALLOCATOR_URL, ALLOCATOR_CA, ALLOCATOR_CLIENT_CERT, ALLOCATOR_CLIENT_KEY (a client
// certificate it accepts) for the gateway in front of it.
// client-ca: a CA (DIR/ca.crt) and one client certificate it issued (DIR/NAME.crt, DIR/NAME.key):
// the matchmaker's, for the gateway's --client-ca-file.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
	case "allocator":
		fs := flag.NewFlagSet("allocator", flag.ExitOnError)
		envFile := fs.String("env-file", "", "where to write the allocator's address and certificate files")
		_ = fs.Parse(os.Args[2:])
		if *envFile == "" {
			die(fmt.Errorf("allocator: --env-file is required"))
		}
		runAllocator(dir, *envFile)
	case "client-ca":
		fs := flag.NewFlagSet("client-ca", flag.ExitOnError)
		out := fs.String("dir", "", "directory for ca.crt, NAME.crt and NAME.key")
		cn := fs.String("cn", "matchmaker", "the client certificate's common name (and file name)")
		_ = fs.Parse(os.Args[2:])
		if *out == "" {
			die(fmt.Errorf("client-ca: --dir is required"))
		}
		t := &tool{}
		ca := harness.NewTestCA(t, *out, "playground-client-ca")
		crt, key := ca.Issue(t, *cn, *cn, false)
		fmt.Printf("client CA %s, client certificate %s, key %s\n", ca.CAFile, crt, key)
	case "unregister":
		kubectl("", "delete", "--ignore-not-found", "mutatingwebhookconfiguration/allocating-webhook",
			"validatingwebhookconfiguration/allocating-webhook")
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: e2ectl register --port P --ca FILE [--failure-policy Fail|Ignore] | e2ectl unregister |\n"+
		"       e2ectl allocator --env-file FILE | e2ectl client-ca --dir DIR [--cn NAME]")
	os.Exit(2)
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "e2ectl:", err)
	os.Exit(1)
}

// runAllocator serves the stand-in agones-allocator until SIGTERM or SIGINT.
func runAllocator(dir, envFile string) {
	cp, err := harness.Attach(dir)
	if err != nil {
		die(err)
	}
	t := &tool{}
	a := cp.StartAllocatorStandin(t)
	env := fmt.Sprintf("ALLOCATOR_URL=%s\nALLOCATOR_CA=%s\nALLOCATOR_CLIENT_CERT=%s\nALLOCATOR_CLIENT_KEY=%s\n",
		a.URL, a.CAFile, a.ClientCert, a.ClientKey)
	// Written whole, then renamed: a reader never sees half of it.
	if err := os.WriteFile(envFile+".tmp", []byte(env), 0o644); err != nil {
		die(err)
	}
	if err := os.Rename(envFile+".tmp", envFile); err != nil {
		die(err)
	}
	fmt.Printf("e2ectl: stand-in agones-allocator on %s (REST POST /gameserverallocation and gRPC)\n", a.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	t.runCleanups()
	fmt.Println("e2ectl: stand-in agones-allocator stopped")
}

// tool is the testing.TB the harness's helpers get outside a test: a failure ends the command with
// the message, cleanups run at runCleanups. The embedded interface is nil: a harness helper calling
// a method not listed here is a bug of this tool and panics.
type tool struct {
	testing.TB
	cleanups []func()
}

func (*tool) Helper()                        {}
func (*tool) Name() string                   { return "e2ectl" }
func (*tool) Failed() bool                   { return false }
func (*tool) Fatal(args ...any)              { die(fmt.Errorf("%s", fmt.Sprint(args...))) }
func (*tool) Fatalf(format string, a ...any) { die(fmt.Errorf(format, a...)) }
func (*tool) Errorf(format string, a ...any) { die(fmt.Errorf(format, a...)) }
func (*tool) Logf(format string, a ...any)   { fmt.Fprintf(os.Stderr, format+"\n", a...) }
func (t *tool) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (t *tool) runCleanups() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
