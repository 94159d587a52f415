package agonesreal

// A fake kubelet for the real Agones out of cluster: one Node (127.0.0.1, Ready), and for every
// Pod the Agones controller creates: bound to the node, one SDK sidecar process (the real
// sdk-server) and one game-server process (the real simple-game-server), the Pod marked Running
// with podIP 127.0.0.1 and running container statuses; when the Pod is deleted, both processes
// are killed and the Pod is removed (grace period 0), as a kubelet confirms a deletion.
//
// Ports: in a cluster each pod has its own network namespace; here every process shares the
// host's, so the kubelet gives each sidecar its own gRPC/HTTP/health ports and each game server
// listens on its GameServer's host port (PORT = the first container port's hostPort, which Agones
// allocated from --min-port/--max-port).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

const (
	// NodeName is the fake node every Agones pod runs on.
	NodeName = "agones-fake-node"
	// sidecarName is the SDK sidecar container's name (pkg/gameservers/controller.go).
	sidecarName = "agones-gameserver-sidecar"
	// containerAnnotation names the game server container (agonesv1.GameServerContainerAnnotation).
	containerAnnotation = "agones.dev/container"
)

// Kubelet runs the pods of the fake node.
type Kubelet struct {
	cs      kubernetes.Interface
	bin     string // directory of sdk-server and simple-game-server
	logDir  string
	portSeq func() int // a free TCP port

	mu      sync.Mutex
	pods    map[string]*podProcs // ns/name
	sdk     map[string]string    // ns/serviceAccount -> kubeconfig of that identity
	errs    []string
	started int
	cancel  context.CancelFunc
	done    chan struct{}
	// SidecarArgs are added to every sdk-server's command line (e.g. --request-rate-limit).
	SidecarArgs []string
}

type podProcs struct {
	uid      string
	procs    []*exec.Cmd
	grpcPort int
	httpPort int
	gsPort   int
}

// AddSDK makes kubeconfig the identity of the sidecars of pods in ns running as serviceAccount
// (harness.ControlPlane.SDK / ServiceAccountSDK's Kubeconfig).
func (k *Kubelet) AddSDK(ns, serviceAccount, kubeconfig string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sdk[ns+"/"+serviceAccount] = kubeconfig
}

// Errors are the problems the kubelet met (a pod it could not run).
func (k *Kubelet) Errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

// Running is the number of pods whose processes run now.
func (k *Kubelet) Running() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pods)
}

// GameServerPort is the port the game server of pod ns/name listens on (0 if not running).
func (k *Kubelet) GameServerPort(ns, name string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.pods[ns+"/"+name]; p != nil {
		return p.gsPort
	}
	return 0
}

func (k *Kubelet) errorf(format string, args ...interface{}) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, fmt.Sprintf(format, args...))
}

// StartKubelet registers the node and runs pods until Stop.
func StartKubelet(ctx context.Context, cs kubernetes.Interface, binDir, logDir string, freePort func() int) (*Kubelet, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{"kubernetes.io/hostname": NodeName}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeExternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: NodeName},
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("register node: %w", err)
	}
	created.Status = node.Status
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	k := &Kubelet{cs: cs, bin: binDir, logDir: logDir, portSeq: freePort, pods: map[string]*podProcs{},
		sdk: map[string]string{}, cancel: cancel, done: make(chan struct{})}
	go k.run(kctx)
	return k, nil
}

// Stop kills every process and stops watching (pods are left as they are).
func (k *Kubelet) Stop() {
	k.cancel()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range k.pods {
		killAll(p)
		delete(k.pods, key)
	}
}

func (k *Kubelet) run(ctx context.Context) {
	defer close(k.done)
	for ctx.Err() == nil {
		list, err := k.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			k.sync(ctx, &list.Items[i])
		}
		w, err := k.cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				k.forget(pod)
				continue
			}
			k.sync(ctx, pod)
		}
		w.Stop()
	}
}

func killAll(p *podProcs) {
	for _, c := range p.procs {
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	}
}

func (k *Kubelet) forget(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	k.mu.Lock()
	p := k.pods[key]
	if p != nil && p.uid == string(pod.UID) {
		delete(k.pods, key)
	} else {
		p = nil
	}
	k.mu.Unlock()
	if p != nil {
		killAll(p)
	}
}

func (k *Kubelet) sync(ctx context.Context, pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		k.forget(pod)
		zero := int64(0)
		err := k.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			k.errorf("delete pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		return
	}
	k.mu.Lock()
	known := false
	for key := range k.sdk {
		if strings.HasPrefix(key, pod.Namespace+"/") {
			known = true
		}
	}
	k.mu.Unlock()
	if !known {
		return // a pod of another test's namespace (left behind by a stopped Agones)
	}
	if pod.Spec.NodeName == "" {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: NodeName}}
		if err := k.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil && ctx.Err() == nil &&
			!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			k.errorf("bind pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
		return // the bound pod comes back through the watch
	}
	if pod.Spec.NodeName != NodeName {
		return
	}
	key := pod.Namespace + "/" + pod.Name
	k.mu.Lock()
	running := k.pods[key] != nil
	k.mu.Unlock()
	if running {
		return
	}
	p, err := k.start(pod)
	if err != nil {
		k.errorf("start pod %s: %v", key, err)
		return
	}
	k.mu.Lock()
	k.pods[key] = p
	k.started++
	k.mu.Unlock()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	pod.Status.PodIP = "127.0.0.1"
	pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	statuses := func(cs []corev1.Container) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for i, c := range cs {
			out = append(out, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true,
				Started:     boolPtr(true),
				ContainerID: fmt.Sprintf("fake://%s-%s-%d", pod.UID, c.Name, i),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		return out
	}
	pod.Status.ContainerStatuses = statuses(pod.Spec.Containers)
	pod.Status.InitContainerStatuses = statuses(pod.Spec.InitContainers)
	if _, err := k.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		k.errorf("pod %s status: %v", key, err)
	}
}

func boolPtr(b bool) *bool { return &b }

// literalEnv is the container's env with literal values (valueFrom: only the namespace).
func literalEnv(pod *corev1.Pod, c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = pod.Namespace
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = pod.Name
		}
	}
	return env
}

func envList(m map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func (k *Kubelet) start(pod *corev1.Pod) (*podProcs, error) {
	var sidecar, game *corev1.Container
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	gsName := pod.Annotations[containerAnnotation]
	for i := range all {
		switch {
		case all[i].Name == sidecarName:
			sidecar = &all[i]
		case all[i].Name == gsName:
			game = &all[i]
		}
	}
	if sidecar == nil || game == nil {
		return nil, fmt.Errorf("no %s or game server container %q", sidecarName, gsName)
	}
	sa := pod.Spec.ServiceAccountName
	k.mu.Lock()
	kubeconfig := k.sdk[pod.Namespace+"/"+sa]
	k.mu.Unlock()
	if kubeconfig == "" {
		return nil, fmt.Errorf("no SDK identity for service account %s/%s (Kubelet.AddSDK)", pod.Namespace, sa)
	}
	p := &podProcs{uid: string(pod.UID), grpcPort: k.portSeq(), httpPort: k.portSeq()}
	health := k.portSeq()
	// The sidecar: its env (GAMESERVER_NAME, POD_NAMESPACE, FEATURE_GATES, LOG_LEVEL,
	// REQUESTS_RATE_LIMIT) and args, ports replaced by this host's unique ones.
	env := literalEnv(pod, *sidecar)
	args := []string{}
	for _, a := range sidecar.Args {
		if strings.HasPrefix(a, "--grpc-port=") || strings.HasPrefix(a, "--http-port=") {
			continue
		}
		args = append(args, a)
	}
	args = append(args, "--local=false", "--kubeconfig="+kubeconfig,
		fmt.Sprintf("--grpc-port=%d", p.grpcPort), fmt.Sprintf("--http-port=%d", p.httpPort),
		fmt.Sprintf("--health-port=%d", health))
	args = append(args, k.SidecarArgs...)
	if err := k.spawn(p, pod.Name+".sdk", filepath.Join(k.bin, "sdk-server"), args, env); err != nil {
		return nil, err
	}
	// The game server: its env plus the SDK ports of its sidecar; it listens on the host port.
	genv := literalEnv(pod, *game)
	genv["AGONES_SDK_GRPC_PORT"] = strconv.Itoa(p.grpcPort)
	genv["AGONES_SDK_HTTP_PORT"] = strconv.Itoa(p.httpPort)
	for _, port := range game.Ports {
		if port.HostPort != 0 {
			p.gsPort = int(port.HostPort)
			break
		}
	}
	if p.gsPort == 0 {
		p.gsPort = k.portSeq()
	}
	genv["PORT"] = strconv.Itoa(p.gsPort)
	if err := k.spawn(p, pod.Name+".game", filepath.Join(k.bin, "simple-game-server"), game.Args, genv); err != nil {
		killAll(p)
		return nil, err
	}
	return p, nil
}

func (k *Kubelet) spawn(p *podProcs, name, bin string, args []string, env map[string]string) error {
	logf, err := os.OpenFile(filepath.Join(k.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = envList(env)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.procs = append(p.procs, cmd)
	return nil
}
