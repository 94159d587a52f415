#include "server/cert_reloader.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "util/io/file.h"
#include "util/io/log.h"
#include "util/io/mutex.h"
#include "util/time_format.h"

namespace aw::server {

CertReloader::CertReloader(std::string cert_path, std::string key_path,
                           prometheus::Registry& registry, std::chrono::milliseconds interval)
    : expiry_(prometheus::BuildGauge()
                  .Name("allocating_webhook_certificate_expiry_timestamp_seconds")
                  .Help("notAfter of the serving certificate, as a Unix timestamp")
                  .Register(registry)
                  .Add({})),
      reloader_({
          .what = "serving certificate",
          .files = cert_path + " " + key_path,
          .read = [cert_path, key_path]() -> StatusOr<Contents> {
            StatusOr<std::string> cert = util::ReadFile(cert_path);
            if (!cert) return cert.status();
            StatusOr<std::string> key = util::ReadFile(key_path);
            if (!key) return key.status();
            return Contents{std::move(cert).value(), std::move(key).value()};
          },
          .parse = [cert_path, key_path](const Contents& c) -> KeyPairResult {
            return ParseKeyPair(c.cert, c.key, cert_path, key_path);
          },
          .on_install =
              [this, cert_path](const KeyPair& pair) {
                expiry_.Set(static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                                    pair.not_after().time_since_epoch())
                                                    .count()));
                log::info("serving certificate loaded",
                          {{"subject", pair.subject()},
                           {"sha256", pair.fingerprint_sha256()},
                           {"not_after", util::FormatRfc3339(pair.not_after(),
                                                             util::Rfc3339Precision::kSeconds)},
                           {"cert_file", cert_path}});
                if (pair.not_after() < std::chrono::system_clock::now()) {
                  log::warn("serving certificate has expired", {{"subject", pair.subject()}});
                }
              },
          .interval = interval,
          .look_again_after = kLookAgainAfter,
          .reloads = &prometheus::BuildCounter()
                          .Name("allocating_webhook_certificate_reloads_total")
                          .Help("Serving certificate/key pairs installed after a change on disk")
                          .Register(registry)
                          .Add({}),
          .failures = &prometheus::BuildCounter()
                           .Name("allocating_webhook_certificate_reload_failures_total")
                           .Help("Changed certificate/key files rejected (unreadable or not a "
                                 "matching pair); the previous pair keeps serving")
                           .Register(registry)
                           .Add({}),
      }) {}

CertReloader::~CertReloader() { Stop(); }

Status CertReloader::LoadInitial() { return reloader_.LoadInitial(); }

bool CertReloader::PollOnce() { return reloader_.PollOnce(); }

Status CertReloader::Start(boost::asio::any_io_executor executor) {
  reloader_.Start(std::move(executor));
  return Status::Ok();
}

void CertReloader::Stop() { reloader_.Stop(); }

std::shared_ptr<const KeyPair> CertReloader::Current() const { return reloader_.Current(); }

}  // namespace aw::server
