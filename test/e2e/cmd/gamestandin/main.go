// gamestandin is a game-server stand-in process for trying the resolver by hand (scripts/up's
// playground) and for the end-to-end tests: it listens on 127.0.0.1 TCP/UDP/HTTP, prints its
// ports, and plays one GameServer: whenever the GameServer enters Allocating it "loads" for
// --load-time (probes fail), then answers probes and sets the SDK readiness annotation
// agones.dev/sdk-allocating-ready = allocating.agones.dev/allocation (the same JSON patch the
// Agones SDK sidecar sends).
//
//	gamestandin --kubeconfig FILE --context agones-sdk --namespace NS --name GS [--load-time 2s]
//	            [--set-status [--status-context agones-controller]]
//	                             (also move the GameServer to Ready with 127.0.0.1 and these ports, as
//	                             Agones' controller does; the e2e tests pass the namespace's own SDK
//	                             identity as --context and the controller as --status-context)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agones-allocating-webhook/e2e/standin"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file")
	kctx := flag.String("context", "", "kubeconfig context (the SDK's identity)")
	ns := flag.String("namespace", "default", "GameServer namespace")
	name := flag.String("name", "", "GameServer name")
	load := flag.Duration("load-time", 2*time.Second, "time to load a match after entering Allocating (negative: never ready)")
	setStatus := flag.Bool("set-status", false, "move the GameServer to Ready with address 127.0.0.1 and the stand-in's ports")
	statusCtx := flag.String("status-context", "", "kubeconfig context for --set-status (what Agones' controller writes; "+
		"the SDK's own identity may not: Agones' SDK role has no get/update); default: --context")
	flag.Parse()
	if *name == "" {
		log.Fatal("--name is required")
	}
	client := func(context string) dynamic.Interface {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
		if err != nil {
			log.Fatal(err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			log.Fatal(err)
		}
		return dyn
	}
	dyn := client(*kctx)
	if *statusCtx == "" {
		*statusCtx = *kctx
	}
	s, err := standin.Listen()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ports, _ := json.Marshal(map[string]int{"game": s.UDPPort(), "tcp": s.TCPPort(), "http": s.HTTPPort()})
	fmt.Println(string(ports))

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if *setStatus {
		c := client(*statusCtx).Resource(schema.GroupVersionResource{Group: "agones.dev", Version: "v1", Resource: "gameservers"}).Namespace(*ns)
		gs, err := c.Get(ctx, *name, metav1.GetOptions{})
		if err != nil {
			log.Fatal(err)
		}
		_ = unstructured.SetNestedField(gs.Object, "Ready", "status", "state")
		_ = unstructured.SetNestedField(gs.Object, "127.0.0.1", "status", "address")
		_ = unstructured.SetNestedSlice(gs.Object, s.Ports(), "status", "ports")
		if _, err := c.Update(ctx, gs, metav1.UpdateOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	s.Play(ctx, dyn, *ns, *name, *load, log.Printf)
}
