// CRC32C on ISA-L. See include/aquifer/erasure.h.
#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

#include "aquifer/erasure.h"

namespace aquifer {

uint32_t Crc32c(std::span<const std::byte> bytes, uint32_t crc) {
  // ISA-L's crc32_iscsi applies neither the initial nor the final inversion of standard CRC32C;
  // inverting on the way in and out makes results chain: the raw register is ~crc.
  uint32_t reg = ~crc;
  auto* p = const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(bytes.data()));
  size_t left = bytes.size();
  while (left > 0) {
    const int len = static_cast<int>(std::min<size_t>(left, INT_MAX));
    reg = crc32_iscsi(p, len, reg);
    p += len;
    left -= static_cast<size_t>(len);
  }
  return ~reg;
}

}  // namespace aquifer
