#include "kube/transport.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <fmt/format.h>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "util/log.h"

namespace aw::kube {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxErrorBody = 64 * 1024;
// Idle keep-alive connections kept for reuse. Must cover the callers' concurrency (the resolver's
// patch workers, default 32, plus events and leases): a call that finds no idle connection builds
// a new SSL_CTX and does a full handshake, which under a burst cost most of the process's CPU
// (OpenSSL 3 context creation is lock-heavy).
constexpr size_t kMaxIdle = 64;
// A hashed-certificate directory that never exists: see NewClient().
constexpr const char* kNoSystemCaDir = "/nonexistent/allocating-webhook/no-system-roots";

struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

// Parses every certificate in a PEM bundle.
bool ParseCerts(const std::string& pem, std::vector<std::unique_ptr<X509, X509Deleter>>* out,
                std::string* err) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (true) {
    X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (!x) break;
    out->emplace_back(x);
  }
  ERR_clear_error();
  if (out->empty()) {
    *err = "no PEM certificate found";
    return false;
  }
  return true;
}

// Bearer token, from a static string or a file re-read when it changes.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file) : token_(std::move(token)), file_(std::move(file)) {}

  std::string Get(bool force_reload) {
    if (file_.empty()) return token_;
    std::lock_guard<std::mutex> lk(mu_);
    auto now = Clock::now();
    if (force_reload || !loaded_ || now - last_check_ >= std::chrono::seconds(1)) {
      last_check_ = now;
      struct stat st {};
      bool changed = true;
      if (::stat(file_.c_str(), &st) == 0) {
        changed = !loaded_ || force_reload || st.st_mtim.tv_sec != mtime_.tv_sec ||
                  st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_ || st.st_ino != ino_;
      }
      if (changed) {
        std::string err;
        if (auto t = ReadFileToString(file_, &err)) {
          std::string v = *t;
          while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
          if (loaded_ && v != cached_) log::info("kube: bearer token file changed; using the new token", {{"file", file_}});
          cached_ = std::move(v);
          loaded_ = true;
          mtime_ = st.st_mtim;
          size_ = st.st_size;
          ino_ = st.st_ino;
        } else if (!loaded_) {
          log::warn("kube: cannot read bearer token file", {{"file", file_}, {"error", err}});
        }
      }
    }
    return cached_;
  }
  bool FromFile() const { return !file_.empty(); }

 private:
  std::string token_;
  std::string file_;
  std::mutex mu_;
  bool loaded_ = false;
  std::string cached_;
  Clock::time_point last_check_{};
  struct timespec mtime_ {};
  off_t size_ = 0;
  ino_t ino_ = 0;
};

}  // namespace

void Cancellation::Cancel() {
  auto deadline = Clock::now() + std::chrono::milliseconds(1500);
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancelled_ = true;
  }
  // The call may be between "registered" and "socket open": keep stopping for a short while.
  while (true) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!stopper_) return;
      stopper_();
    }
    if (Clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Cancellation::cancelled() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cancelled_;
}

void Cancellation::Reset() {
  std::lock_guard<std::mutex> lk(mu_);
  cancelled_ = false;
}

class HttpsTransport final : public Transport {
 public:
  HttpsTransport(const ClientConfig& c) : cfg_(c), tokens_(c.token, c.token_file) {}

  bool Init(std::string* err) {
    if (!cfg_.ca_pem.empty() && !cfg_.insecure_skip_tls_verify) {
      if (!ParseCerts(cfg_.ca_pem, &ca_, err)) {
        *err = "certificate authority: " + *err;
        return false;
      }
    }
    if (!cfg_.client_cert_pem.empty()) {
      std::vector<std::unique_ptr<X509, X509Deleter>> certs;
      if (!ParseCerts(cfg_.client_cert_pem, &certs, err)) {
        *err = "client certificate: " + *err;
        return false;
      }
      client_cert_ = std::move(certs.front());
      std::unique_ptr<BIO, BioDeleter> bio(
          BIO_new_mem_buf(cfg_.client_key_pem.data(), static_cast<int>(cfg_.client_key_pem.size())));
      EVP_PKEY* k = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
      if (!k) {
        *err = "client key: " + OpenSslError();
        return false;
      }
      client_key_.reset(k);
      if (X509_check_private_key(client_cert_.get(), client_key_.get()) != 1) {
        ERR_clear_error();
        *err = "client key does not match the client certificate";
        return false;
      }
    }
    return true;
  }

  Result<HttpResponse> Do(const HttpRequest& req) override { return Run(req, nullptr); }

  Result<HttpResponse> Stream(const HttpRequest& req,
                              const std::function<bool(std::string_view)>& on_data) override {
    return Run(req, &on_data);
  }

  void Shutdown() override {
    shutdown_.store(true);
    // Clients may be between "registered" and "socket open"; keep stopping for a short while.
    auto deadline = Clock::now() + std::chrono::milliseconds(1500);
    while (true) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        idle_.clear();
        if (in_flight_.empty()) return;
        for (auto* c : in_flight_) c->stop();
      }
      if (Clock::now() > deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  bool IsShutdown() const override { return shutdown_.load(); }

 private:
  std::unique_ptr<httplib::SSLClient> NewClient(std::chrono::milliseconds timeout) {
    std::unique_ptr<httplib::SSLClient> c;
    if (client_cert_) {
      c = std::make_unique<httplib::SSLClient>(cfg_.host, cfg_.port, client_cert_.get(), client_key_.get());
    } else {
      c = std::make_unique<httplib::SSLClient>(cfg_.host, cfg_.port);
    }
    if (cfg_.insecure_skip_tls_verify) {
      c->enable_server_certificate_verification(false);
    } else {
      c->enable_server_certificate_verification(true);
      if (!ca_.empty()) {
        X509_STORE* store = X509_STORE_new();
        for (auto& x : ca_) X509_STORE_add_cert(store, x.get());
        c->set_ca_cert_store(store);  // takes ownership
        // Trust exactly the configured CA, as client-go does. Without a CA path, cpp-httplib
        // calls SSL_CTX_set_default_verify_paths() on first connect, which would add the system's
        // public roots to this store (and parse the whole system bundle for every new client).
        // A directory lookup on a path that holds no certificates satisfies it and adds nothing.
        c->set_ca_cert_path("", kNoSystemCaDir);
      }
    }
    (void)timeout;
    c->set_url_encode(false);
    c->set_keep_alive(true);
    c->set_follow_location(false);
    return c;
  }

  std::unique_ptr<httplib::SSLClient> Acquire(bool streaming, std::chrono::milliseconds timeout) {
    std::unique_ptr<httplib::SSLClient> c;
    if (!streaming) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!idle_.empty()) {
        c = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (!c) c = NewClient(timeout);
    auto connect = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10));
    c->set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(connect).count(),
                              (connect.count() % 1000) * 1000);
    c->set_read_timeout(timeout.count() / 1000, (timeout.count() % 1000) * 1000);
    c->set_write_timeout(timeout.count() / 1000, (timeout.count() % 1000) * 1000);
    return c;
  }

  Result<HttpResponse> Run(const HttpRequest& req, const std::function<bool(std::string_view)>* on_data) {
    bool retried_auth = false;
    while (true) {
      auto r = RunOnce(req, on_data, retried_auth);
      // A rotated token: re-read the file and retry once.
      if (r.ok() && r->status == 401 && tokens_.FromFile() && !retried_auth) {
        retried_auth = true;
        continue;
      }
      return r;
    }
  }

  Result<HttpResponse> RunOnce(const HttpRequest& req,
                               const std::function<bool(std::string_view)>* on_data, bool force_token) {
    if (shutdown_.load()) return TransportError("client is shut down", true);
    bool streaming = on_data != nullptr;
    auto client = Acquire(streaming, req.timeout);
    {
      std::lock_guard<std::mutex> lk(mu_);
      in_flight_.insert(client.get());
    }
    if (req.cancel) {
      std::lock_guard<std::mutex> lk(req.cancel->mu_);
      if (req.cancel->cancelled_) {
        std::lock_guard<std::mutex> lk2(mu_);
        in_flight_.erase(client.get());
        return TransportError("call cancelled", true);
      }
      httplib::SSLClient* raw = client.get();
      req.cancel->stopper_ = [raw] { raw->stop(); };
    }
    httplib::Headers headers;
    headers.emplace("Accept", "application/json");
    headers.emplace("User-Agent", "allocating-webhook");
    std::string token = tokens_.Get(force_token);
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    std::string path = cfg_.base_path + req.path;

    HttpResponse out;
    bool stopped_by_caller = false;
    httplib::Result res(nullptr, httplib::Error::Unknown);
    if (shutdown_.load()) {
      std::lock_guard<std::mutex> lk(mu_);
      in_flight_.erase(client.get());
      return TransportError("client is shut down", true);
    }
    if (req.method == "GET" && streaming) {
      res = client->Get(
          path, headers,
          [&](const httplib::Response& r) {
            out.status = r.status;
            return true;
          },
          [&](const char* data, size_t len) {
            if (shutdown_.load() || (req.cancel && req.cancel->cancelled())) return false;
            if (out.status >= 200 && out.status < 300) {
              if (!(*on_data)(std::string_view(data, len))) {
                stopped_by_caller = true;
                return false;
              }
            } else if (out.body.size() < kMaxErrorBody) {
              out.body.append(data, std::min(len, kMaxErrorBody - out.body.size()));
            }
            return true;
          });
    } else if (req.method == "GET") {
      res = client->Get(path, headers);
    } else if (req.method == "POST") {
      res = client->Post(path, headers, req.body, req.content_type);
    } else if (req.method == "PUT") {
      res = client->Put(path, headers, req.body, req.content_type);
    } else if (req.method == "PATCH") {
      res = client->Patch(path, headers, req.body, req.content_type);
    } else if (req.method == "DELETE") {
      if (req.body.empty()) {
        res = client->Delete(path, headers);
      } else {
        res = client->Delete(path, headers, req.body, req.content_type);
      }
    } else {
      std::lock_guard<std::mutex> lk(mu_);
      in_flight_.erase(client.get());
      return TransportError("unsupported method " + req.method);
    }
    bool cancelled = false;
    if (req.cancel) {
      std::lock_guard<std::mutex> lk(req.cancel->mu_);
      req.cancel->stopper_ = nullptr;
      cancelled = req.cancel->cancelled_;
    }
    bool keep = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      in_flight_.erase(client.get());
      keep = res && !streaming && !shutdown_.load() && idle_.size() < kMaxIdle;
    }
    if (shutdown_.load()) return TransportError("client is shut down", true);
    if (cancelled) return TransportError("call cancelled", true);
    if (!res) {
      if (stopped_by_caller || (res.error() == httplib::Error::Canceled && streaming && out.status != 0)) {
        return out;  // the caller stopped the stream
      }
      return TransportError(fmt::format("{} {}:{}{}: {}", req.method, cfg_.host, cfg_.port,
                                        StripQuery(req.path), httplib::to_string(res.error())));
    }
    out.status = res->status;
    if (!streaming || out.status < 200 || out.status >= 300) {
      if (!streaming) out.body = std::move(res->body);
    }
    out.retry_after = res->get_header_value("Retry-After");
    if (keep) {
      std::lock_guard<std::mutex> lk(mu_);
      idle_.push_back(std::move(client));
    }
    return out;
  }

  static std::string StripQuery(const std::string& p) { return p.substr(0, p.find('?')); }

  ClientConfig cfg_;
  TokenSource tokens_;
  std::vector<std::unique_ptr<X509, X509Deleter>> ca_;
  std::unique_ptr<X509, X509Deleter> client_cert_;
  std::unique_ptr<EVP_PKEY, PkeyDeleter> client_key_;
  std::atomic<bool> shutdown_{false};
  std::mutex mu_;
  std::vector<std::unique_ptr<httplib::SSLClient>> idle_;
  std::set<httplib::SSLClient*> in_flight_;
};



std::unique_ptr<Transport> NewHttpsTransport(const ClientConfig& config, std::string* err) {
  // OpenSSL writes to sockets with write(2): a connection the server closed (e.g. a pooled
  // keep-alive connection across an API server restart) would raise SIGPIPE and kill the process.
  // Ignore it unless the program installed its own handler.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  auto t = std::make_unique<HttpsTransport>(config);
  if (!t->Init(err)) return nullptr;
  return t;
}

}  // namespace aw::kube
