// Shared by the libFuzzer targets of the wire's parsers (tests/fuzz/CMakeLists.txt): a check
// that aborts, so the fuzzer records the input that broke a promise of the parser's contract.
#pragma once

#include <cstdio>
#include <cstdlib>

#define AQ_FUZZ_CHECK(cond)                                                         \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
