// Package controlplane checks the e2e harness itself: the identities and their RBAC, restarting
// kube-apiserver, the CRD enum helpers and the rendering of the webhook configurations from
// manifests/ (no webhook process needed).
package controlplane

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agones-allocating-webhook/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

func TestIdentities(t *testing.T) {
	cp := harness.Setup(t)
	want := map[string]string{
		harness.Admin:            "admin",
		harness.Resolver:         harness.ResolverUser,
		harness.Resolver2:        harness.ResolverUser,
		harness.AgonesController: harness.AgonesControllerUser,
		harness.AgonesAllocator:  harness.AgonesAllocatorUser,
		harness.AgonesSDK:        harness.AgonesSDKUser,
		harness.User:             harness.AliceUser,
	}
	for id, user := range want {
		out := cp.MustKubectl(t, id, "", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if out != user {
			t.Errorf("context %s: user %q, want %q", id, out, user)
		}
	}
	if cp.Token(t, harness.Resolver) == cp.Token(t, harness.Resolver2) {
		t.Error("the two resolver tokens are equal")
	}
}

func can(t *testing.T, cp *harness.ControlPlane, id string, attr authv1.ResourceAttributes) bool {
	t.Helper()
	r, err := cp.Clientset(t, id).AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
		&authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

func TestResolverHasOnlyManifestRBAC(t *testing.T) {
	cp := harness.Setup(t)
	gs := func(verb string) authv1.ResourceAttributes {
		return authv1.ResourceAttributes{Group: "agones.dev", Resource: "gameservers", Verb: verb, Namespace: "default"}
	}
	for _, verb := range []string{"get", "list", "watch", "patch", "update"} {
		if !can(t, cp, harness.Resolver, gs(verb)) {
			t.Errorf("resolver cannot %s gameservers (manifests/base grants it)", verb)
		}
	}
	for _, verb := range []string{"create", "delete"} {
		if can(t, cp, harness.Resolver, gs(verb)) {
			t.Errorf("resolver may %s gameservers: it must have only the manifests' RBAC", verb)
		}
	}
	if can(t, cp, harness.Resolver, authv1.ResourceAttributes{Group: "agones.dev", Resource: "fleets", Verb: "update", Namespace: "default"}) {
		t.Error("resolver may update fleets")
	}
	crd := authv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "patch", Name: "gameservers.agones.dev"}
	if !can(t, cp, harness.Resolver, crd) {
		t.Error("resolver cannot patch the GameServer CRD")
	}
	crd.Name = "fleets.agones.dev"
	if can(t, cp, harness.Resolver, crd) {
		t.Error("resolver may patch other CRDs")
	}
	if !can(t, cp, harness.AgonesSDK, gs("patch")) || !can(t, cp, harness.AgonesController, gs("update")) ||
		!can(t, cp, harness.AgonesAllocator, gs("update")) {
		t.Error("test identities lack their gameserver rights")
	}
}

// The per-namespace SDK identity: a real service account with a TokenRequest token and exactly
// Agones' SDK rights (list/watch/patch its namespace's gameservers; no get, no update, no other
// namespace).
func TestSDKIdentity(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	other := cp.Namespace(t)
	sdk := cp.SDK(t, ns)
	if sdk.User != "system:serviceaccount:"+ns+":agones-sdk" {
		t.Fatalf("SDK user %q", sdk.User)
	}
	so, se, err := sdk.Kubectl("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil || so != sdk.User {
		t.Fatalf("kubectl auth whoami as the SDK: %q %v %s", so, err, se)
	}
	cs := kubernetes.NewForConfigOrDie(sdk.Config)
	allowed := func(verb, namespace string) bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Group: "agones.dev", Resource: "gameservers", Verb: verb, Namespace: namespace}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, verb := range []string{"list", "watch", "patch"} {
		if !allowed(verb, ns) {
			t.Errorf("the SDK may not %s gameservers in its namespace", verb)
		}
	}
	for _, verb := range []string{"get", "update", "create", "delete"} {
		if allowed(verb, ns) {
			t.Errorf("the SDK may %s gameservers (Agones' SDK role does not allow it)", verb)
		}
	}
	if allowed("patch", other) {
		t.Error("the SDK may patch gameservers in another namespace")
	}
	cp.CreateReadyGameServer(t, ns, harness.NewGameServer("mine", false))
	if _, err := sdk.SetAnnotation(harness.Ctx(t), "mine", "hello", "world"); err != nil {
		t.Fatalf("SDK SetAnnotation: %v", err)
	}
	if got := harness.Annotation(cp.GetGameServer(t, ns, "mine"), "agones.dev/sdk-hello"); got != "world" {
		t.Fatalf("agones.dev/sdk-hello = %q", got)
	}
	// Another service account (a pod template's serviceAccountName) gets its own identity.
	own := cp.ServiceAccountSDK(t, ns, "game-sa")
	if own.User != "system:serviceaccount:"+ns+":game-sa" {
		t.Fatalf("user %q", own.User)
	}
	if _, err := own.SetLabel(harness.Ctx(t), "mine", "phase", "lobby"); err != nil {
		t.Fatalf("SetLabel as game-sa: %v", err)
	}
}

func TestEnumHelpers(t *testing.T) {
	cp := harness.Setup(t)
	if cp.EnumHasAllocating(t) {
		t.Fatal("stock CRD already lists Allocating")
	}
	stock := cp.StateEnum(t)
	if len(stock) != 11 {
		t.Errorf("stock enum %v: want the 11 Agones states", stock)
	}
	cp.AddAllocatingToEnum(t)
	cp.AddAllocatingToEnum(t) // idempotent
	enum := cp.StateEnum(t)
	if len(enum) != 12 || enum[11] != "Allocating" {
		t.Errorf("enum after AddAllocatingToEnum: %v", enum)
	}
	cp.ResetStockCRD(t)
	if cp.EnumHasAllocating(t) {
		t.Error("ResetStockCRD left Allocating in the enum")
	}
}

func TestGameServerHasNoStatusSubresource(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	gs := cp.CreateReadyGameServer(t, ns, harness.NewGameServer("plain", false))
	if harness.State(gs) != "Ready" {
		t.Fatalf("state %q", harness.State(gs))
	}
	// A full UPDATE changes the state (no status subresource would reset it).
	sdk := cp.SDK(t, ns).Dyn
	got, err := harness.SDKSetState(harness.Ctx(t), sdk, ns, "plain", "Allocated")
	if err != nil || harness.State(got) != "Allocated" {
		t.Fatalf("SDK patch to Allocated: %v %s", err, harness.Describe(got))
	}
	// The closed enum refuses unknown states.
	_, err = harness.SDKSetState(harness.Ctx(t), sdk, ns, "plain", "Allocating")
	if err == nil || !strings.Contains(err.Error(), "Unsupported value") {
		t.Fatalf("Allocating with the stock enum: err=%v, want a 422 Unsupported value", err)
	}
}

func TestRestartAPIServer(t *testing.T) {
	cp := harness.Setup(t)
	ns := cp.Namespace(t)
	cp.CreateReadyGameServer(t, ns, harness.NewGameServer("survivor", false))
	cp.StopAPIServer(t)
	if _, _, err := cp.Kubectl(harness.Admin, "", "get", "--request-timeout=2s", "gs", "-n", ns); err == nil {
		t.Fatal("kubectl works with kube-apiserver stopped")
	}
	cp.StartAPIServer(t, []string{"--v=1"})
	if got := cp.GetGameServer(t, ns, "survivor"); harness.State(got) != "Ready" {
		t.Fatalf("after restart: %s", harness.Describe(got))
	}
	cp.RestartAPIServer(t, []string{})
}

func TestRenderWebhookConfigs(t *testing.T) {
	cp := harness.Setup(t)
	certs := cp.WebhookCerts(t)
	out, err := harness.RenderWebhookConfigs(cp.KubectlPath, t.TempDir(), 12345, certs+"/ca.crt", harness.RegisterOptions{FailurePolicy: "Fail"})
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(certs + "/ca.crt")
	b64 := base64.StdEncoding.EncodeToString(ca)
	for _, path := range []string{"/mutate/gameservers", "/validate/gameservers", "/validate/fleets", "/validate/gameserversets", "/validate/gameserverallocations"} {
		if !strings.Contains(out, "url: https://127.0.0.1:12345"+path+"\n") {
			t.Errorf("rendered configs lack url for %s", path)
		}
	}
	if strings.Count(out, "caBundle: "+b64) != 5 || strings.Contains(out, "failurePolicy: Ignore") || strings.Count(out, "failurePolicy: Fail") != 5 {
		t.Errorf("caBundle/failurePolicy not set on every webhook:\n%s", out)
	}
	for _, kind := range []string{"kind: Deployment", "kind: Service\n", "kind: PodDisruptionBudget", "service:"} {
		if strings.Contains(out, kind) {
			t.Errorf("local overlay still contains %q", kind)
		}
	}
	for _, keep := range []string{"objectSelector", "allocating.agones.dev/enabled", "kind: ClusterRole", "reinvocationPolicy: IfNeeded"} {
		if !strings.Contains(out, keep) {
			t.Errorf("rendered configs lost %q from manifests/base", keep)
		}
	}
	// The API server accepts them (server-side dry run).
	if so, se, err := cp.Kubectl(harness.Admin, out, "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatalf("dry-run apply: %v\n%s%s", err, so, se)
	}
}
