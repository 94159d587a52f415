#include "gateway/io/cache.h"

#include <chrono>

#include "contract/keys.h"
#include "runtime/service.h"

namespace aw::gateway {
namespace {

kube::InformerOptions Options(const std::string& watch_namespace) {
  kube::InformerOptions o;
  o.name = "gateway-gameservers";
  o.resource = kube::kGameServers;
  o.namespace_ = watch_namespace;
  o.label_selector = std::string(keys::kEnabledLabel) + "=true";
  o.resync = std::chrono::seconds(60);
  o.decode = kube::InformerOptions::Decode::kGameServer;
  return o;
}

}  // namespace

GameServerCache::GameServerCache(kube::Client& client, const std::string& watch_namespace,
                                 prometheus::Registry* registry,
                                 boost::asio::any_io_executor timers)
    : waiters_([this](const std::string& name) { return Lookup(name); }, std::move(timers)),
      informer_(client, Options(watch_namespace), registry) {
  informer_.AddHandler(&waiters_);
  informer_.AddHandler(&request_keys_);
}

std::vector<kube::ObjectPtr> GameServerCache::Lookup(const std::string& name) const {
  return informer_.GetByName(name);
}

bool GameServerCache::HasSynced() const { return informer_.HasSynced(); }

Status GameServerCache::Run(runtime::RunContext& ctx) {
  waiters_.Start();
  informer_.Start();
  while (!ctx.stop().stop_requested()) {
    if (informer_.WaitForSync(std::chrono::milliseconds(200))) {
      ctx.Ready();
      break;
    }
  }
  runtime::WaitForStop(ctx.stop());
  informer_.Stop();
  waiters_.Stop();
  return Status::Ok();
}

}  // namespace aw::gateway
