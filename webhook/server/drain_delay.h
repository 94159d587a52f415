// The --drain-delay rule of both binaries (the webhook's admission listener and the allocation
// gateway's): at least 0 and less than --shutdown-grace, which includes it.
//
// Promise: ValidateDrainDelay is OK for 0 <= drain_delay < shutdown_grace, else InvalidArgument
// naming both flags. No I/O.
#pragma once

#include <chrono>

#include "util/status.h"

namespace aw::server {

Status ValidateDrainDelay(std::chrono::nanoseconds drain_delay,
                          std::chrono::nanoseconds shutdown_grace);

}  // namespace aw::server
