#include "runtime/service.h"

#include <condition_variable>
#include <mutex>

namespace aw::runtime {

void WaitForStop(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
}

std::unique_ptr<Runnable> MakeServiceRunnable(std::string name, std::function<Status()> start,
                                              std::function<void()> stop) {
  return MakeRunnable(std::move(name), [start = std::move(start),
                                        stop = std::move(stop)](RunContext& ctx) -> Status {
    if (Status st = start(); !st.ok()) return st;
    ctx.Ready();
    WaitForStop(ctx.stop());
    stop();
    return Status::Ok();
  });
}

}  // namespace aw::runtime
