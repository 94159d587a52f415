#include "gateway/io/listener.h"

namespace aw::gateway {

void RegisterListenerFlags(flags::FlagSet& fs, ListenerFlags* f) {
  fs.String("bind-address", &f->bind_address, "address the gateway and health ports bind to");
  fs.Int("port", &f->port, "HTTPS port of the allocation API", 1, 65535);
  fs.Int("health-port", &f->health_port, "plain-HTTP port for /healthz, /readyz, /metrics", 1,
         65535);
  fs.String("tls-cert-file", &f->tls_cert_file, "serving certificate (PEM), reloaded on change");
  fs.String("tls-key-file", &f->tls_key_file, "serving private key (PEM), reloaded on change");
  fs.String("client-ca-file", &f->client_ca_file,
            "CA bundle (PEM) that client certificates must chain to (mTLS), reloaded on change");
  fs.String("client-ca-dir", &f->client_ca_dir,
            "directory of client CAs (every *.crt and *.pem in it, as agones-allocator reads its "
            "allocator-client-ca Secret), reloaded on change; replaces --client-ca-file when set");
  fs.Bool("disable-mtls", &f->disable_mtls,
          "accept clients without a certificate (like agones-allocator's --disable-mtls)");
  fs.Duration("cert-reload-interval", &f->reload_interval,
              "how often the certificate, key and client CA files are re-read",
              std::chrono::milliseconds(100));
  fs.Size("io-threads", &f->io_threads, "threads serving the gateway's connections", 1, 64);
  fs.Size("max-connections", &f->max_connections,
          "open connections at most (waiting requests included)", 1, 1'000'000);
  fs.Size("max-body-bytes", &f->max_body_bytes, "largest AllocationRequest body (413 above)", 1,
          64 * 1024 * 1024);
  fs.Duration("read-timeout", &f->read_timeout, "whole-request read deadline",
              std::chrono::milliseconds(100));
  fs.Duration("idle-timeout", &f->idle_timeout, "keep-alive idle timeout",
              std::chrono::milliseconds(100));
}

server::ConnectionOptions ListenerOptions(const ListenerFlags& f) {
  server::ConnectionOptions co;
  co.name = "gateway";
  co.bind_address = f.bind_address;
  co.port = f.port;
  co.io_threads = f.io_threads;
  co.max_connections = f.max_connections;
  co.limits.max_body_bytes = f.max_body_bytes;
  co.read_timeout = f.read_timeout;
  co.idle_timeout = f.idle_timeout;
  // gRPC (allocation.AllocationService, grpc.health.v1.Health) on the same port as REST, over
  // HTTP/2 (ALPN h2); everything else is REST.
  co.http2 = true;
  co.h2.max_concurrent_streams = 1000;  // a matchmaker's connection holds one stream per wait
  return co;
}

}  // namespace aw::gateway
