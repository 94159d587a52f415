package harness

// The processes most packages start the same way, written once: a webhook replica that also
// resolves (ResolverArgs, StartResolver), an allocation gateway in front of the stand-in allocator
// (StartGateway), and the whole gateway stack a gateway test needs (StartGatewayStack).

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withDefaults is defaults with every flag that extra names replaced by extra's value, then the
// rest of extra (a flag given twice would leave which one wins to the binary's parser).
func withDefaults(defaults []string, extra ...string) []string {
	out := make([]string, 0, len(defaults)+len(extra))
	for _, d := range defaults {
		name, _, _ := strings.Cut(strings.TrimPrefix(d, "--"), "=")
		if !hasFlag(extra, name) {
			out = append(out, d)
		}
	}
	return append(out, extra...)
}

// ResolverArgsFor is the command line of a webhook replica that also resolves: the kubeconfig
// (context Resolver, the resolver's service account), the CRD taken to accept Allocating, leader
// election short enough for fail-over tests to run in seconds (3s/2s/500ms), a 5s resync and info
// logs. A flag in extra replaces the default of that name.
func ResolverArgsFor(kubeconfig string, extra ...string) []string {
	return withDefaults([]string{
		"--kubeconfig=" + kubeconfig, "--context=" + Resolver,
		"--crd-accepts-allocating=true",
		"--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms",
		"--resync-period=5s", "--log-level=info",
	}, extra...)
}

// ResolverArgs is ResolverArgsFor with the control plane's kubeconfig.
func (cp *ControlPlane) ResolverArgs(extra ...string) []string {
	return ResolverArgsFor(cp.Kubeconfig, extra...)
}

// StartResolver starts a webhook replica named name with ResolverArgs(extra...), registers the
// webhooks at it (RegisterOptions{}: they are called before it returns) and waits until it leads.
// The CRD must accept Allocating already (cp.AddAllocatingToEnum) for the gate to rewrite.
func (cp *ControlPlane) StartResolver(t testing.TB, name string, extra ...string) *Webhook {
	t.Helper()
	wh := cp.StartWebhook(t, WebhookOptions{Name: name, Args: cp.ResolverArgs(extra...)})
	cp.RegisterWebhooks(t, wh, RegisterOptions{})
	wh.WaitLeader(t, 20*time.Second)
	return wh
}

// StartGateway starts allocation-gateway (GatewayBinary) in front of the stand-in allocator a,
// trusting client certificates of clientCAFile, and waits until it is ready: it runs as an
// ordinary untrusted identity ("alice", as its own ServiceAccount is in a cluster: its delivery
// marks must pass both webhooks as untrusted writes), calls a over mTLS with a's client
// certificate, --deadline=20s, debug logs. A flag in extra replaces the default of that name.
func (cp *ControlPlane) StartGateway(t testing.TB, a *AllocatorStandin, clientCAFile string, extra ...string) *Webhook {
	return cp.StartGatewayNamed(t, "gateway", a, clientCAFile, extra...)
}

// StartGatewayNamed is StartGateway with the process (and its log) named `name`: a second
// replica.
func (cp *ControlPlane) StartGatewayNamed(t testing.TB, name string, a *AllocatorStandin, clientCAFile string, extra ...string) *Webhook {
	t.Helper()
	return cp.StartGatewayTo(t, name, Upstream{URL: a.URL, CAFile: a.CAFile, ClientCert: a.ClientCert, ClientKey: a.ClientKey},
		clientCAFile, extra...)
}

// Upstream is the allocator a gateway calls: its URL, serving CA and a client certificate it
// accepts (the stand-in's fields, or the real agones-allocator's in test/e2e/agonesreal).
type Upstream struct {
	URL, CAFile, ClientCert, ClientKey string
}

// StartGatewayTo is StartGatewayNamed in front of any allocator (e.g. the real agones-allocator).
func (cp *ControlPlane) StartGatewayTo(t testing.TB, name string, a Upstream, clientCAFile string, extra ...string) *Webhook {
	t.Helper()
	args := withDefaults([]string{
		"--kubeconfig=" + cp.Kubeconfig, "--context=" + User,
		"--client-ca-file=" + clientCAFile,
		"--allocator-address=" + a.URL,
		"--allocator-ca-file=" + a.CAFile,
		"--allocator-client-cert-file=" + a.ClientCert,
		"--allocator-client-key-file=" + a.ClientKey,
		"--deadline=20s", "--log-level=debug",
	}, extra...)
	return cp.StartWebhook(t, WebhookOptions{
		Name: name, Binary: GatewayBinary(), Args: args, Wait: "readyz",
		NoDefaults: []string{"trusted-users", "agones-controller-users"},
	})
}

// GatewayStack is what a test of the gateway runs against: the gate (webhook + resolver, leading),
// the stand-in allocator, the gateway in front of it, and a matchmaker's client.
type GatewayStack struct {
	Resolver  *Webhook          // webhook + resolver
	Allocator *AllocatorStandin // the stand-in agones-allocator (REST and gRPC on one port)
	Gateway   *Webhook          // the allocation-gateway process
	ClientCA  *TestCA           // the CA the gateway trusts for client certificates
	ServingCA string            // the gateway's serving CA file
	Client    *http.Client      // a matchmaker with a good client certificate (REST)
}

// StartGatewayStack makes the CRD accept Allocating and starts a GatewayStack: StartResolver,
// StartAllocatorStandin, a client CA in cp.Dir/<name>-clients, StartGateway with gatewayArgs.
// Everything stops when t ends.
func (cp *ControlPlane) StartGatewayStack(t testing.TB, name string, gatewayArgs ...string) *GatewayStack {
	t.Helper()
	cp.AddAllocatingToEnum(t)
	s := &GatewayStack{Resolver: cp.StartResolver(t, "resolver")}
	s.Allocator = cp.StartAllocatorStandin(t)
	s.ClientCA = NewTestCA(t, filepath.Join(cp.Dir, name+"-clients"), "matchmaker-ca")
	s.Gateway = cp.StartGateway(t, s.Allocator, s.ClientCA.CAFile, gatewayArgs...)
	s.ServingCA = s.Gateway.CAFile
	crt, key := s.ClientCA.Issue(t, "director", "director", false)
	s.Client = HTTPSClient(t, s.ServingCA, crt, key)
	return s
}
