// Helpers to run components under the manager (manager.h).
//
// Promise:
//   - WaitForStop(stop) blocks the calling thread until `stop` is requested (no polling).
//   - MakeServiceRunnable(name, start, stop) adapts a component whose work runs on threads it owns
//     (a server's io threads, a watch thread) as a runtime::Service: no thread of the manager is
//     spent on it. start() is its Start (a non-OK Status is its failure, and stop() is then not
//     called); stop() is called once after a successful start, and must return within the
//     manager's stop deadline.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "runtime/manager.h"
#include "util/status.h"

namespace aw::runtime {

void WaitForStop(std::stop_token stop);

std::unique_ptr<Service> MakeServiceRunnable(std::string name, std::function<Status()> start,
                                             std::function<void()> stop);

}  // namespace aw::runtime
