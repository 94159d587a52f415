package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// SDKServiceAccount is the service account Agones runs game-server pods as (Helm value
// agones.serviceaccount.sdk.name) when the GameServer's pod template names none.
const SDKServiceAccount = "agones-sdk"

// SDKClusterRole is the ClusterRole of Agones' SDK (testdata/rbac.yaml, copied from the Helm chart):
// list/watch/patch gameservers, create/patch events.
const SDKClusterRole = "agones-sdk"

// SDKUserFor is the user name kube-apiserver reports for a namespace's service account.
func SDKUserFor(ns, serviceAccount string) string {
	return "system:serviceaccount:" + ns + ":" + serviceAccount
}

// SDK is a game server's own identity: a real ServiceAccount in the GameServer's namespace, with a
// token from the TokenRequest API (what the kubelet mounts into the pod) and the RBAC Agones gives
// the SDK there. Every game-server write of the tests goes through one (stand-in confirmations,
// SetAnnotation, SetState/Allocate()).
type SDK struct {
	Namespace      string
	ServiceAccount string
	User           string // system:serviceaccount:<Namespace>:<ServiceAccount>
	Token          string
	Config         *rest.Config
	Dyn            dynamic.Interface
	// Kubeconfig is a file with a context "sdk" (this identity, default namespace = Namespace) and
	// the control plane's static contexts (agones-controller, admin, ...), for processes and kubectl.
	Kubeconfig string
	cp         *ControlPlane
}

// SDK returns the identity of the SDK sidecar of GameServers in ns: service account agones-sdk,
// bound to Agones' SDK ClusterRole by a RoleBinding agones-sdk-access, as Agones' Helm chart does for
// each game-server namespace.
func (cp *ControlPlane) SDK(t testing.TB, ns string) *SDK {
	t.Helper()
	return cp.ServiceAccountSDK(t, ns, SDKServiceAccount)
}

// ServiceAccountSDK is the identity of a game server whose pod runs as serviceAccount (a GameServer
// whose spec.template.spec.serviceAccountName names it): the service account is created in ns and
// given the same rights as agones-sdk.
func (cp *ControlPlane) ServiceAccountSDK(t testing.TB, ns, serviceAccount string) *SDK {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := cp.Clientset(t, Admin)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, serviceAccount, err)
	}
	user := SDKUserFor(ns, serviceAccount)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: serviceAccount + "-access", Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: SDKClusterRole},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create RoleBinding %s/%s: %v", ns, rb.Name, err)
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, serviceAccount,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, serviceAccount, err)
	}
	cfg := &rest.Config{
		Host:            cp.APIServerURL,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile},
		QPS:             200, Burst: 400,
		Timeout: 30 * time.Second,
	}
	s := &SDK{Namespace: ns, ServiceAccount: serviceAccount, User: user, Token: tr.Status.Token, Config: cfg, cp: cp}
	if s.Dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// The RoleBinding reaches the RBAC authorizer's cache a moment later.
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ok := Poll(10*time.Second, 50*time.Millisecond, func() bool {
		r, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Group: "agones.dev", Resource: "gameservers", Verb: "patch", Namespace: ns}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
	if !ok {
		t.Fatalf("%s: not allowed to patch gameservers in %s after 10s", user, ns)
	}
	s.Kubeconfig = cp.writeSDKKubeconfig(t, s)
	return s
}

func (cp *ControlPlane) writeSDKKubeconfig(t testing.TB, s *SDK) string {
	t.Helper()
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cp.Dir, "sdk-kubeconfigs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, s.Namespace+"."+s.ServiceAccount)
	var ctxs, users string
	for _, id := range AllIdentities {
		ctxs += fmt.Sprintf("- name: %s\n  context:\n    cluster: e2e\n    user: %s\n    namespace: %s\n", id, id, s.Namespace)
		users += fmt.Sprintf("- name: %s\n  user:\n    token: %s\n", id, cp.Token(t, id))
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
current-context: sdk
contexts:
- name: sdk
  context:
    cluster: e2e
    user: sdk
    namespace: %s
%susers:
- name: sdk
  user:
    token: %s
%s`, cp.APIServerURL, base64.StdEncoding.EncodeToString(ca), s.Namespace, ctxs, s.Token, users)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return path
}

// Kubectl runs kubectl as this identity (namespace defaults to the SDK's).
func (s *SDK) Kubectl(stdin string, args ...string) (string, string, error) {
	return s.cp.kubectlWith(s.Kubeconfig, "sdk", stdin, args...)
}

// Get reads the GameServer as the sidecar does (list with a field selector).
func (s *SDK) Get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	return SDKGet(ctx, s.Dyn, s.Namespace, name)
}

// Patch is SDKPatch as this identity.
func (s *SDK) Patch(ctx context.Context, name string, ops ...map[string]interface{}) (*unstructured.Unstructured, error) {
	return SDKPatch(ctx, s.Dyn, s.Namespace, name, ops...)
}

// SetState is SDKSetState as this identity.
func (s *SDK) SetState(ctx context.Context, name, state string) (*unstructured.Unstructured, error) {
	return SDKSetState(ctx, s.Dyn, s.Namespace, name, state)
}

// SetAnnotation is SDKSetAnnotation (SDK SetAnnotation(key, value)) as this identity.
func (s *SDK) SetAnnotation(ctx context.Context, name, key, value string) (*unstructured.Unstructured, error) {
	return SDKSetAnnotation(ctx, s.Dyn, s.Namespace, name, key, value)
}

// SetLabel is SDKSetLabel (SDK SetLabel(key, value)) as this identity.
func (s *SDK) SetLabel(ctx context.Context, name, key, value string) (*unstructured.Unstructured, error) {
	return SDKSetLabel(ctx, s.Dyn, s.Namespace, name, key, value)
}
