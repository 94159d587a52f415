// Package standin is a game-server stand-in for the resolver's end-to-end tests: it listens on
// 127.0.0.1 (TCP, UDP and HTTP), answers readiness probes only once it is "loaded", and confirms
// readiness the way a game server does through the Agones SDK: SetAnnotation("allocating-ready",
// <allocation id>), which the SDK sidecar writes as a JSON patch that first tests
// /metadata/resourceVersion and then adds agones.dev/sdk-allocating-ready.
package standin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/agones-allocating-webhook/e2e/harness"
)

// Keys of the contract (webhook/contract/keys.h is the source of truth).
const (
	AllocationKey = "allocating.agones.dev/allocation"
	SdkReadyKey   = "agones.dev/sdk-allocating-ready"
)

var gameServerGVR = schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "gameservers"}

// Server is one stand-in: three listeners whose probe answers depend on Loaded().
type Server struct {
	tcp    net.Listener // accepted only while loaded (closed listener before that: refused)
	udp    net.PacketConn
	http   net.Listener
	loaded atomic.Bool

	mu      sync.Mutex
	tcpPort int
	closed  bool
	wg      sync.WaitGroup
}

// Listen opens the HTTP and UDP sockets on 127.0.0.1 (ephemeral ports) and reserves a TCP port
// that starts accepting connections when the server is loaded.
func Listen() (*Server, error) {
	s := &Server{}
	var err error
	if s.http, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if s.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		s.http.Close()
		return nil, err
	}
	// Reserve a TCP port: bind, note it, close. It is opened again by SetLoaded(true).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.http.Close()
		s.udp.Close()
		return nil, err
	}
	s.tcpPort = l.Addr().(*net.TCPAddr).Port
	l.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.loaded.Load() {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintln(w, "ready")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "loading")
	})
	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = http.Serve(s.http, mux) }()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 2048)
		for {
			n, addr, err := s.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			if s.loaded.Load() {
				_, _ = s.udp.WriteTo(append([]byte("pong:"), buf[:n]...), addr)
			}
		}
	}()
	return s, nil
}

// Ports are GameServer status.ports entries: "game" (UDP), "tcp" and "http".
func (s *Server) Ports() []interface{} {
	return []interface{}{
		map[string]interface{}{"name": "game", "port": int64(s.UDPPort())},
		map[string]interface{}{"name": "tcp", "port": int64(s.tcpPort)},
		map[string]interface{}{"name": "http", "port": int64(s.HTTPPort())},
	}
}

func (s *Server) UDPPort() int  { return s.udp.LocalAddr().(*net.UDPAddr).Port }
func (s *Server) HTTPPort() int { return s.http.Addr().(*net.TCPAddr).Port }
func (s *Server) TCPPort() int  { return s.tcpPort }
func (s *Server) Loaded() bool  { return s.loaded.Load() }

// SetLoaded switches every probe answer: HTTP 200 vs 503, UDP reply vs silence, TCP accept vs
// refused.
func (s *Server) SetLoaded(v bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded.Store(v)
	if v && s.tcp == nil && !s.closed {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", s.tcpPort))
		if err != nil {
			return err
		}
		s.tcp = l
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	if !v && s.tcp != nil {
		s.tcp.Close()
		s.tcp = nil
	}
	return nil
}

// Close stops every listener.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	if s.tcp != nil {
		s.tcp.Close()
		s.tcp = nil
	}
	s.mu.Unlock()
	s.http.Close()
	s.udp.Close()
	s.wg.Wait()
}

// SetAnnotation is the SDK sidecar's SetAnnotation(key, value) (harness.SDKSetAnnotation): it reads
// the GameServer as the sidecar's informer does (list with a metadata.name field selector: Agones'
// SDK role has no get) and sends a JSON patch that tests that resourceVersion and adds (or replaces)
// agones.dev/sdk-<key>. Like the sidecar's work queue, it retries on a conflict or a failed test
// (re-reading the object) until ctx ends. dyn must act as the GameServer's own SDK identity
// (harness.ControlPlane.SDK): the webhook accepts the readiness annotation from nobody else.
func SetAnnotation(ctx context.Context, dyn dynamic.Interface, ns, name, key, value string) error {
	for {
		_, err := harness.SDKSetAnnotation(ctx, dyn, ns, name, key, value)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ConfirmReady is what the game server does once the match is loaded: read the allocation id
// from its GameServer (allocating.agones.dev/allocation, as WatchGameServer/GameServer() show it)
// and SetAnnotation("allocating-ready", id). It returns the id it confirmed.
func ConfirmReady(ctx context.Context, dyn dynamic.Interface, ns, name string) (string, error) {
	gs, err := harness.SDKGet(ctx, dyn, ns, name)
	if err != nil {
		return "", err
	}
	id := gs.GetAnnotations()[AllocationKey]
	if id == "" {
		return "", fmt.Errorf("%s/%s has no %s annotation (state %v)", ns, name, AllocationKey, state(gs))
	}
	return id, SetAnnotation(ctx, dyn, ns, name, "allocating-ready", id)
}

func state(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "state")
	return s
}

// Play is the whole game-server side for one GameServer: watch it; each time it enters
// Allocating with a new allocation id, load for `loadTime` (probes fail meanwhile), then turn the
// probes ready and confirm the allocation id. loadTime < 0 means never become ready. Returns when
// ctx ends.
func (s *Server) Play(ctx context.Context, dyn dynamic.Interface, ns, name string, loadTime time.Duration, logf func(string, ...interface{})) {
	c := dyn.Resource(gameServerGVR).Namespace(ns)
	confirmed := ""
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			gs, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			id := gs.GetAnnotations()[AllocationKey]
			if state(gs) != "Allocating" || id == "" || id == confirmed {
				continue
			}
			confirmed = id
			if loadTime < 0 {
				continue
			}
			go func(id string) {
				_ = s.SetLoaded(false)
				select {
				case <-ctx.Done():
					return
				case <-time.After(loadTime):
				}
				_ = s.SetLoaded(true)
				if err := SetAnnotation(ctx, dyn, ns, name, "allocating-ready", id); err != nil && logf != nil {
					logf("stand-in %s/%s: SetAnnotation: %v", ns, name, err)
				}
			}(id)
		}
		w.Stop()
	}
}

// SpecPorts are GameServer spec.ports matching Ports()' names: "game" (UDP), "tcp" and "http"
// (the webhook checks that a probe-port name is one of the GameServer's ports).
func SpecPorts() []interface{} {
	port := func(name, protocol string, container int64) interface{} {
		return map[string]interface{}{"name": name, "portPolicy": "Dynamic", "containerPort": container, "protocol": protocol}
	}
	return []interface{}{port("game", "UDP", 7654), port("tcp", "TCP", 7655), port("http", "TCP", 8080)}
}
