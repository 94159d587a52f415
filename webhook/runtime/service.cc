#include "runtime/service.h"

#include <condition_variable>
#include <mutex>

#include "util/io/mutex.h"

namespace aw::runtime {

void WaitForStop(std::stop_token stop) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  cv.Wait(mu, stop, [] { return false; });
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
