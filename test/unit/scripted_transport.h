// ScriptedTransport: the base of the unit tests' fake Kubernetes transports, scripted as blocking
// calls (Do answers a request, Stream feeds a watch's pieces and returns at its end), behind the
// asynchronous kube::Transport interface the client uses.
//
// Promise:
//   - DoAsync runs Do() and then `done`, on the calling thread.
//   - StreamAsync runs Stream() on a helper thread of its own, posts each piece to executor() and
//     waits for its resume (false ends the stream: Stream's on_data returns false); `done` is
//     posted to executor() with Stream()'s result. A fake's Stream() must return on Shutdown() or
//     req.cancel.
//   - executor() is an io_context on a thread of its own, started on first use.
//   - Join() (kube::Client's destructor calls it, after Shutdown(), while the derived fake is
//     still whole) joins the helper threads, then stops and joins the executor's thread (its
//     pending handlers are dropped): afterwards no callback runs on them. Idempotent; not from
//     the executor's own thread. The destructor calls it too.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "kube/transport.h"

namespace aw::test_util {

class ScriptedTransport : public kube::Transport {
 public:
  ~ScriptedTransport() override { Join(); }

  // The fake's script: a whole answer, or a stream's pieces to `on_data` (false: stop reading).
  virtual kube::Result<kube::HttpResponse> Do(const kube::HttpRequest& req) = 0;
  virtual kube::Result<kube::HttpResponse> Stream(
      const kube::HttpRequest& req, const std::function<bool(std::string_view)>& on_data) = 0;

  void DoAsync(const kube::HttpRequest& req, Done done) override { done(Do(req)); }

  void StreamAsync(const kube::HttpRequest& req, OnChunk on_chunk, Done done) override {
    boost::asio::any_io_executor ex = executor();
    std::thread helper([this, req, ex, on_chunk = std::move(on_chunk),
                        done = std::move(done)]() mutable {
      kube::Result<kube::HttpResponse> res = Stream(req, [&](std::string_view data) {
        auto gate = std::make_shared<ResumeGate>();
        std::future<bool> more = gate->Future();
        boost::asio::post(ex, [gate, data = std::string(data), &on_chunk]() mutable {
          on_chunk(data, [gate](bool m) { gate->Set(m); });
        });
        gate.reset();
        return more.get();
      });
      boost::asio::post(
          ex, [done = std::move(done), res = std::move(res)]() mutable { done(std::move(res)); });
    });
    std::lock_guard lk(mu_);
    helpers_.push_back(std::move(helper));
  }

  boost::asio::any_io_executor executor() override {
    std::lock_guard lk(mu_);
    if (!io_) {
      io_ = std::make_unique<Io>();
      io_->thread = std::thread([io = &io_->io] { io->run(); });
    }
    return io_->io.get_executor();
  }

  void Join() override {
    std::vector<std::thread> helpers;
    std::unique_ptr<Io> io;
    {
      std::lock_guard lk(mu_);
      helpers.swap(helpers_);
      io = std::move(io_);
    }
    for (auto& t : helpers) {
      if (t.joinable()) t.join();  // while the executor still runs their posts
    }
    io.reset();  // then stops and joins the executor's thread
  }

 private:
  struct Io {
    boost::asio::io_context io{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{
        io.get_executor()};
    std::thread thread;
    ~Io() {
      work.reset();
      io.stop();
      if (thread.joinable()) thread.join();
    }
  };
  // Hands one piece's resume() answer from the executor to the waiting helper thread; a resume
  // dropped without being called (the executor stopped) counts as resume(false).
  class ResumeGate {
   public:
    ~ResumeGate() { Set(false); }
    void Set(bool more) {
      std::lock_guard lk(mu_);
      if (set_) return;
      set_ = true;
      promise_.set_value(more);
    }
    std::future<bool> Future() { return promise_.get_future(); }

   private:
    std::mutex mu_;
    bool set_ = false;
    std::promise<bool> promise_;
  };

  std::mutex mu_;
  std::unique_ptr<Io> io_;
  std::vector<std::thread> helpers_;
};

}  // namespace aw::test_util
