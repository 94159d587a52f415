// Helpers to run components as runtime::Runnable (manager.h).
//
// Promise:
//   - WaitForStop(stop) blocks the calling thread until `stop` is requested (no polling).
//   - MakeServiceRunnable(name, start, stop) adapts a component whose work runs on threads it owns
//     (a server's io threads, a watch thread): Run calls start(); a non-OK Status is the
//     runnable's failure (stop() is not called). Otherwise it reports Ready, waits for its stop
//     request, calls stop() and returns OK. `stop` must be safe to call once after a successful
//     start and must return within the manager's stop deadline.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "runtime/manager.h"
#include "util/status.h"

namespace aw::runtime {

void WaitForStop(std::stop_token stop);

std::unique_ptr<Runnable> MakeServiceRunnable(std::string name, std::function<Status()> start,
                                              std::function<void()> stop);

}  // namespace aw::runtime
