// CRC-32C (Castagnoli), the checksum that frames journal records.
//
// A small table-driven implementation (slicing by 8), so the store needs no
// extra library. The result matches iSCSI / ext4 / LevelDB CRC-32C:
// Crc32c("123456789") == 0xE3069283.
//
// Thread safety: pure functions; the tables are built at compile time.
#ifndef DROVER_STORE_CRC32C_H_
#define DROVER_STORE_CRC32C_H_

#include <cstdint>
#include <string_view>

namespace drover::store {

// Continues a CRC-32C over `data`, starting from the CRC of earlier bytes
// (`crc` = 0 for the first chunk), so Crc32c(a + b) == Extend(Crc32c(a), b).
uint32_t Crc32cExtend(uint32_t crc, std::string_view data);

// The CRC-32C of `data`.
inline uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data); }

}  // namespace drover::store

#endif  // DROVER_STORE_CRC32C_H_
