package harness

// Identities: kubeconfig context names written by scripts/controlplane (one static token each).
const (
	Admin            = "admin"             // user "admin", group system:masters
	Resolver         = "resolver"          // ResolverUser, first token
	Resolver2        = "resolver-2"        // ResolverUser, second token (token-file rotation tests)
	AgonesController = "agones-controller" // AgonesControllerUser: GameServerSet/Fleet controllers, GameServerAllocation API
	AgonesAllocator  = "agones-allocator"  // AgonesAllocatorUser: the REST/gRPC allocator service
	AgonesSDK        = "agones-sdk"        // AgonesSDKUser
	User             = "user"              // "alice": an ordinary, untrusted user who may edit Agones objects
	Gateway          = "gateway"           // GatewayUser: the allocation-gateway (RBAC: scripts/up applies manifests/components/gateway/rbac.yaml)
)

// User names as kube-apiserver reports them in AdmissionReview userInfo.
const (
	ResolverUser         = "system:serviceaccount:allocating-system:allocating-webhook"
	AgonesControllerUser = "system:serviceaccount:agones-system:agones-controller"
	AgonesAllocatorUser  = "system:serviceaccount:agones-system:agones-allocator"
	// AgonesSDKUser is the static agones-sdk token's user: the SDK identity of GameServers in
	// namespace "default" only. Tests use ControlPlane.SDK(t, ns), the namespace's own service account.
	AgonesSDKUser = "system:serviceaccount:default:agones-sdk"
	AliceUser     = "alice"
	GatewayUser   = "system:serviceaccount:allocating-system:allocation-gateway"
)

// AllIdentities lists every context in the kubeconfig.
var AllIdentities = []string{Admin, Resolver, Resolver2, AgonesController, AgonesAllocator, AgonesSDK, User, Gateway}
