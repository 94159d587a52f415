// Where the API server is and how to authenticate to it.
//
// Promise: LoadInCluster() and LoadKubeconfig() produce a ClientConfig with everything resolved to
// bytes (CA, client certificate and key as PEM) except the bearer token file, which the transport
// re-reads when it changes (bound service-account tokens rotate). Every problem yields a clear,
// single-line error naming the file, context and field; nothing throws out of these functions.
// TLS verification is always on unless the kubeconfig says insecure-skip-tls-verify AND the
// caller allows it (--allow-insecure-kubeconfig).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace aw::kube {

struct ClientConfig {
  std::string host;  // DNS name or IP literal (no brackets)
  int port = 443;
  std::string base_path;  // path prefix of the server URL, "" or "/prefix" (no trailing slash)
  std::string ca_pem;     // empty: system trust store
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string token;       // static bearer token
  std::string token_file;  // re-read when its mtime/size changes (takes precedence over token)
  bool insecure_skip_tls_verify = false;
  // The name sent as TLS SNI and verified in the server certificate ("" = host); e.g. a
  // certificate issued for a name other than the address dialled.
  std::string tls_server_name;
  bool plain_http = false;  // no TLS at all (an http:// server URL); the TLS fields are unused
  std::string namespace_;   // in-cluster namespace file, or the context's namespace ("" if none)
  std::string source;       // "in-cluster" or "kubeconfig <path> context <name>", for logs
};

struct InClusterPaths {
  std::string dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// Uses KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the service-account files.
StatusOr<ClientConfig> LoadInCluster(const InClusterPaths& paths = {});
// True when KUBERNETES_SERVICE_HOST is set (we are probably in a pod).
bool InClusterAvailable();

// Reads and parses a kubeconfig file. `context` empty = current-context. Relative file
// references resolve against the kubeconfig's directory.
StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, std::string_view context,
                                      bool allow_insecure);
// Parses kubeconfig YAML text (files referenced inside are read relative to base_dir).
StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, const std::string& base_dir,
                                       const std::string& origin, std::string_view context,
                                       bool allow_insecure);

// Splits "https://host:port/prefix" into config fields (InvalidArgument naming the URL).
Status ParseServerUrl(std::string_view url, ClientConfig* out);

}  // namespace aw::kube
