// Gateway: a call's state (attempts, history, the waiter's ticket) is touched on the call's strand
// only (issue 35 item 5). The allocator's answers come on the allocator client's own thread, the
// waiter's decisions on the test's thread (as the informer's would come on the Kubernetes
// client's); each is dispatched onto the call's strand of the executor the gateway was given, so
// the re-allocations and the final answer (naming every lost attempt) run there, one at a time.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "gateway/io/gateway.h"
#include "loopback_http_test_util.h"
#include "policy/gameserver_stream.h"

namespace aw::gateway {
namespace {

using namespace std::chrono_literals;

using test_util::Listener;
using test_util::ReadRequest;

std::string LastAllocated(int i) { return "2026-01-02T03:04:0" + std::to_string(i) + ".5Z"; }

// The allocator's answer for the i-th allocation: gated server gs-i.
std::string Allocation(int i) {
  const std::string body =
      R"({"gameServerName":"gs-)" + std::to_string(i) +
      R"(","source":"local","metadata":{"labels":{"allocating.agones.dev/enabled":"true"},)"
      R"("annotations":{"agones.dev/last-allocated":")" +
      LastAllocated(i) + R"("}}})";
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// gs-i as the informer would see it once its allocation is lost (Unhealthy).
kube::ObjectPtr Unhealthy(int i) {
  const std::string json = R"({"metadata":{"name":"gs-)" + std::to_string(i) +
                           R"(","namespace":"ns","annotations":{"agones.dev/last-allocated":")" +
                           LastAllocated(i) + R"("}},"status":{"state":"Unhealthy"}})";
  auto o = std::make_shared<kube::CachedObject>();
  EXPECT_TRUE(policy::DecodeGameServer(json, o.get()).ok()) << json;
  return o;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

TEST(GatewayCall, RetriesAndAnswersOnTheCallsStrand) {
  Listener l;
  std::thread allocator_server([&] {
    int c = ::accept(l.fd, nullptr, nullptr);
    std::string carry;
    for (int i = 1; ReadRequest(c, &carry); ++i) {
      const std::string answer = Allocation(i);
      ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    }
    ::close(c);
  });

  // The gateway's executor: one thread of its own, distinct from the allocator client's.
  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::promise<std::thread::id> strand_thread_id;
  std::thread strand_thread([&] {
    strand_thread_id.set_value(std::this_thread::get_id());
    ioc.run();
  });
  const std::thread::id strand_id = strand_thread_id.get_future().get();

  AllocatorOptions ao;
  ao.address = "http://127.0.0.1:" + std::to_string(l.port);
  ao.workers = 1;
  AllocatorClient allocator(ao);
  ASSERT_TRUE(allocator.Init().ok());  // an I/O thread of its own
  allocator.Start();
  WaiterRegistry::Lookup lookup = [](const std::string&) { return std::vector<kube::ObjectPtr>{}; };
  WaiterRegistry waiters(lookup);
  waiters.Start();
  prometheus::Registry registry;
  GatewayOptions go;
  go.max_attempts = 3;
  Gateway gw(go, allocator, waiters, lookup, registry, ioc.get_executor());

  std::promise<std::pair<server::HttpResponse, std::thread::id>> answered;
  server::HttpRequest req;
  req.method = "POST";
  req.path = "/gameserverallocation";
  req.body = R"({"namespace":"ns"})";
  gw.Handle(req, [&answered](server::HttpResponse res) {
    answered.set_value({std::move(res), std::this_thread::get_id()});
  });
  // Each allocation is lost while waiting (decided here, on the test's thread): the call allocates
  // again on its strand, three times in all.
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(WaitUntil([&] { return waiters.Waiting() == 1; }, 10s)) << "attempt " << i;
    waiters.OnUpdate(nullptr, Unhealthy(i));
  }
  auto f = answered.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  auto [res, answered_on] = f.get();
  EXPECT_EQ(res.status, 429) << res.body;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_NE(res.body.find("gs-" + std::to_string(i) + ": "), std::string::npos) << res.body;
  }
  EXPECT_NE(res.body.find("3 attempts made"), std::string::npos) << res.body;
  EXPECT_EQ(answered_on, strand_id) << "the answer was not given on the call's strand";

  allocator.Stop();
  waiters.Stop();
  work.reset();
  strand_thread.join();
  ::shutdown(l.fd, SHUT_RDWR);
  allocator_server.join();
}

}  // namespace
}  // namespace aw::gateway
