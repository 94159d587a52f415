// The calling thread's OpenSSL error queue as text, for error messages.
//
// Promise: OpenSslErrors() drains the queue (it is empty afterwards) and returns every entry
// joined with "; ", or `if_empty` when the queue was empty.
#pragma once

#include <string>
#include <string_view>

namespace aw::util {

std::string OpenSslErrors(std::string_view if_empty = "");

}  // namespace aw::util
