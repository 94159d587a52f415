// The resolver's Kubernetes adapters (error classification) and its flags.
#include <gtest/gtest.h>

#include "kube/core/status.h"
#include "resolver/kube_adapters.h"
#include "resolver/service.h"

namespace aw::resolver {
namespace {

kube::ApiError Err(int status, std::string reason, std::string message) {
  kube::ApiError e;
  e.http_status = status;
  e.code = status;
  e.reason = std::move(reason);
  e.message = std::move(message);
  return e;
}

TEST(ClassifyPatchError, MapsApiErrors) {
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(409, "Conflict", "the object has been modified"))),
            PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(
                422, "Invalid", "testing value /metadata/resourceVersion failed: test failed"))),
            PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(
                422, "Invalid", "the server rejected our request due to an error in our request"))),
            PatchStatus::kConflict);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(
                Err(422, "Invalid", "status.state: Unsupported value: \"Allocating\""))),
            PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(404, "NotFound", "gameservers \"x\" not found"))),
            PatchStatus::kNotFound);
  EXPECT_EQ(PatchStatusOf(
                ClassifyPatchError(Err(400, "BadRequest", "admission webhook denied the request"))),
            PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(403, "Forbidden", "no"))), PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(500, "InternalError", "etcd"))),
            PatchStatus::kRetry);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(429, "TooManyRequests", "slow down"))),
            PatchStatus::kRetry);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(kube::TransportError("connection refused"))),
            PatchStatus::kRetry);
  // The one mapping's other rows (kube::ApiError::ToStatus, as client-go reads them): 409
  // AlreadyExists is a refusal, not a conflict; 408 is worth retrying.
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(409, "AlreadyExists", "exists"))),
            PatchStatus::kRejected);
  EXPECT_EQ(PatchStatusOf(ClassifyPatchError(Err(408, "Timeout", "slow"))), PatchStatus::kRetry);
  EXPECT_EQ(ClassifyPatchError(Err(409, "Conflict", "modified")).code(),
            Err(409, "Conflict", "modified").ToStatus().code());
}

TEST(ResolverFlags, ProbeTimeoutMustBeBelowThePeriod) {
  policy::Policy policy;  // default probe period 250ms
  ResolverFlags f;
  EXPECT_TRUE(ValidateResolverFlags(f, policy).ok());
  f.probe_timeout = std::chrono::milliseconds(250);
  Status err = ValidateResolverFlags(f, policy);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("--probe-timeout"), std::string::npos);
}

TEST(ResolverFlags, Registered) {
  flags::FlagSet fs("t", "t");
  ResolverFlags f;
  RegisterResolverFlags(fs, &f);
  auto r = fs.Parse(std::vector<std::string>{"--probe-timeout=100ms", "--probe-concurrency=64",
                                             "--resync-period=10s", "--udp-probe-payload=hi",
                                             "--resolver-workers=4"});
  ASSERT_EQ(r.status, flags::FlagSet::Status::kOk) << r.message;
  EXPECT_EQ(f.probe_timeout, std::chrono::milliseconds(100));
  EXPECT_EQ(f.probe_concurrency, 64u);
  EXPECT_EQ(f.resync_period, std::chrono::seconds(10));
  EXPECT_EQ(f.udp_probe_payload, "hi");
  EXPECT_EQ(f.workers, 4u);
}

}  // namespace
}  // namespace aw::resolver
