// The port file a daemon writes once it serves, so a test or `aquifer cluster up` that asked for
// port 0 learns the port the kernel chose: one line, "HOST:PORT\n".
#pragma once

#include <string>

#include "aquifer/status.h"

namespace aquifer {

// Writes `address` and a newline to `path` atomically (a temporary file beside it, then
// rename), so a reader never sees half a line. Errors: kInternal naming the file and errno.
Status WritePortFile(const std::string& path, const std::string& address);

}  // namespace aquifer
