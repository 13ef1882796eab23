// Untrusted text (names from clients, addresses and labels from data servers, file names) made
// safe to print on an operator's terminal, in a log line or an event: bytes outside printable
// ASCII (control characters, escape sequences, non-ASCII) and backslashes become \xNN, and the
// result is cut at `max_bytes` (200 by default) plus "...", so such text cannot forge lines or
// move the cursor. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aquifer {

std::string Printable(std::string_view text, size_t max_bytes = 200);

}  // namespace aquifer
