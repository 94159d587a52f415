#include "server/drain_delay.h"

namespace aw::server {

Status ValidateDrainDelay(std::chrono::nanoseconds drain_delay,
                          std::chrono::nanoseconds shutdown_grace) {
  if (drain_delay < std::chrono::nanoseconds::zero() || drain_delay >= shutdown_grace) {
    return Status::InvalidArgument(
        "--drain-delay must be at least 0 and less than --shutdown-grace");
  }
  return Status::Ok();
}

}  // namespace aw::server
