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

std::unique_ptr<Service> MakeServiceRunnable(std::string name, std::function<Status()> start,
                                             std::function<void()> stop) {
  return MakeService(std::move(name), std::move(start),
                     [stop = std::move(stop)](std::chrono::steady_clock::time_point) {
                       stop();
                       return Status::Ok();
                     });
}

}  // namespace aw::runtime
