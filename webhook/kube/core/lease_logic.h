// Pure leader-election decisions (no I/O, no clock reads): the client-go algorithm as functions of
// the observed Lease record and a local monotonic time passed in.
#pragma once

#include <rapidjson/document.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace aw::kube {

struct LeaseRecord {
  std::string holder_identity;
  int lease_duration_seconds = 0;
  std::string acquire_time;  // RFC 3339 micro, as stored
  std::string renew_time;
  int lease_transitions = 0;
  bool operator==(const LeaseRecord&) const = default;
};

// Reads spec of a Lease object (missing fields -> defaults).
LeaseRecord LeaseRecordFromObject(const rapidjson::Value& lease);
// Writes the record into `lease`'s spec (creating spec when absent).
void WriteLeaseRecord(const LeaseRecord& r, rapidjson::Document* lease);

// RFC 3339 with microseconds, UTC: 2006-01-02T15:04:05.000000Z (Kubernetes MicroTime).
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

enum class LeaseAction {
  kCreate,    // no lease exists: create it holding it ourselves
  kRenew,     // we hold it: renew
  kTakeOver,  // free, released or expired: take it (transitions + 1)
  kWait,      // someone else holds a valid lease
};

struct LeaseDecisionInput {
  std::optional<LeaseRecord> current;  // nullopt: the Lease does not exist
  std::string identity;
  // When this client last saw `current` change (local monotonic clock) and now.
  std::chrono::steady_clock::time_point observed_time;
  std::chrono::steady_clock::time_point now;
};

LeaseAction DecideLease(const LeaseDecisionInput& in);

// The record to write for `action` (kCreate/kRenew/kTakeOver).
LeaseRecord NextLeaseRecord(LeaseAction action, const std::optional<LeaseRecord>& current,
                            const std::string& identity, int lease_duration_seconds,
                            const std::string& now_micro);

// The record written on graceful release (client-go: holder cleared, duration 1s).
LeaseRecord ReleasedLeaseRecord(const LeaseRecord& current, const std::string& now_micro);

}  // namespace aw::kube
