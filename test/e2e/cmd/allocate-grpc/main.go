// Command allocate-grpc makes one allocation.AllocationService/Allocate call, as Agones'
// examples/allocator-client does (TLS with a client certificate, the call's deadline as its
// grpc-timeout), and prints the answer as one line of JSON ({"gameServerName":...,"state":...} or
// {"code":...,"message":...}). scripts/e2e-kind uses it to call the allocation gateway over gRPC.
//
//	allocate-grpc --addr HOST:PORT --server-name NAME --ca CA --cert CRT --key KEY
//	              [--namespace default] [--match-label k=v] [--timeout 50s] [--idempotency-key K]
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/agones-allocating-webhook/e2e/grpcapi/allocation"
)

func main() {
	addr := flag.String("addr", "", "host:port of the gateway (or agones-allocator)")
	serverName := flag.String("server-name", "", "name its serving certificate must carry")
	caFile := flag.String("ca", "", "CA of its serving certificate (PEM)")
	certFile := flag.String("cert", "", "client certificate (PEM)")
	keyFile := flag.String("key", "", "client key (PEM)")
	ns := flag.String("namespace", "default", "the request's namespace")
	label := flag.String("match-label", "", "k=v: a gameServerSelector's matchLabels")
	timeout := flag.Duration("timeout", 50*time.Second, "the call's deadline")
	key := flag.String("idempotency-key", "", "x-allocating-idempotency-key metadata")
	flag.Parse()
	if *addr == "" || *caFile == "" || *certFile == "" || *keyFile == "" {
		fmt.Fprintln(os.Stderr, "allocate-grpc: --addr, --ca, --cert and --key are required")
		os.Exit(2)
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		die(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		die(fmt.Errorf("%s: no certificate", *caFile))
	}
	pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		die(err)
	}
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair},
		ServerName: *serverName, MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		die(err)
	}
	defer conn.Close()
	req := &pb.AllocationRequest{Namespace: *ns}
	if k, v, ok := strings.Cut(*label, "="); ok {
		req.GameServerSelectors = []*pb.GameServerSelector{{MatchLabels: map[string]string{k: v}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-allocating-idempotency-key", *key)
	}
	res, err := pb.NewAllocationServiceClient(conn).Allocate(ctx, req)
	out := map[string]interface{}{}
	if err != nil {
		s := status.Convert(err)
		out["code"], out["message"] = s.Code().String(), s.Message()
	} else {
		out["gameServerName"], out["source"] = res.GameServerName, res.Source
		out["annotations"] = res.GetMetadata().GetAnnotations()
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if err != nil {
		os.Exit(1)
	}
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "allocate-grpc:", err)
	os.Exit(2)
}
