#include "runtime/dispatcher.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "runtime/io_thread.h"
#include "util/io/log.h"
#include "util/io/mutex.h"

namespace aw::runtime {

namespace net = boost::asio;

struct Dispatcher::Impl {
  explicit Impl(std::string n) : name(std::move(n)) {}

  void Run() {
    for (;;) {
      try {
        io.run();
        break;
      } catch (const std::exception& e) {
        log::error("unexpected exception on the dispatcher thread",
                   {{"dispatcher", name}, {"error", e.what()}});
      }
    }
    {
      MutexLock lock(mu);
      ended = true;
    }
    cv.SignalAll();
  }

  const std::string name;
  net::io_context io{1};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work{
      net::make_work_guard(io)};
  std::thread thread;
  Mutex mu;
  CondVar cv;
  bool ended GUARDED_BY(mu) = false;     // Run() returned
  bool stopping GUARDED_BY(mu) = false;  // Stop() began
};

Dispatcher::Dispatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Start(std::string name) {
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(std::move(name));
  } catch (const std::system_error& e) {  // boost::system::system_error derives from it
    return Status::IOError(std::string("dispatcher: its event loop (eventfd/epoll): ") + e.what());
  }
  Impl* p = impl.get();
  try {
    impl->thread = std::thread([p] { p->Run(); });
  } catch (const std::system_error& e) {
    return Status::IOError(std::string("dispatcher: cannot start its thread: ") + e.what());
  }
  return std::unique_ptr<Dispatcher>(new Dispatcher(std::move(impl)));
}

Dispatcher::~Dispatcher() {
  (void)Stop(std::chrono::steady_clock::now() + std::chrono::seconds(5));
}

boost::asio::any_io_executor Dispatcher::executor() const { return impl_->io.get_executor(); }

bool Dispatcher::Running() const {
  MutexLock lock(impl_->mu);
  return !impl_->stopping;
}

Status Dispatcher::Stop(std::chrono::steady_clock::time_point deadline) {
  Impl& d = *impl_;
  DieIfThread(d.thread.get_id(), "Dispatcher::Stop");
  bool ran_out = true;
  {
    MutexLock lock(d.mu);
    if (d.stopping) return Status::Ok();
    d.stopping = true;
  }
  // The guard is touched only here (once, under `stopping`) and by the destructor after the join.
  d.work.reset();
  {
    MutexLock lock(d.mu);
    ran_out = d.cv.WaitUntil(d.mu, deadline, [&d]() REQUIRES(d.mu) { return d.ended; });
  }
  if (!ran_out) d.io.stop();  // the work left is destroyed, unrun, with the io_context
  if (d.thread.joinable()) d.thread.join();
  if (!ran_out) {
    log::error("the dispatcher still had work at its stop deadline; stopped it",
               {{"dispatcher", d.name}});
    return Status::DeadlineExceeded("dispatcher " + d.name +
                                    ": work left at the stop deadline (a component did not stop)");
  }
  return Status::Ok();
}

}  // namespace aw::runtime
