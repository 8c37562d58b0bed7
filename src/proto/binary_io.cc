#include "proto/binary_io.h"

namespace drover::proto::internal {

bool BinaryReader::Fail(const char* what, const std::string& problem) {
  if (error_.empty()) error_ = std::string(what) + ": " + problem;
  return false;
}

bool BinaryReader::Byte(uint8_t* v, const char* what) {
  if (!ok()) return false;
  if (pos_ >= in_.size()) return Fail(what, "truncated at byte " + std::to_string(pos_));
  *v = static_cast<uint8_t>(in_[pos_++]);
  return true;
}

bool BinaryReader::Unsigned(uint64_t* v, const char* what, uint64_t max) {
  if (!ok()) return false;
  const size_t start = pos_;
  uint64_t x = 0;
  for (int shift = 0;; shift += 7) {
    if (pos_ >= in_.size()) return Fail(what, "truncated at byte " + std::to_string(pos_));
    const auto b = static_cast<uint8_t>(in_[pos_++]);
    // The tenth byte may carry only the top bit of 64.
    if (shift == 63 && b > 1)
      return Fail(what, "overflows 64 bits at byte " + std::to_string(start));
    x |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
  }
  if (x > max) {
    return Fail(what, std::to_string(x) + " is more than " + std::to_string(max) + " (byte " +
                          std::to_string(start) + ")");
  }
  *v = x;
  return true;
}

bool BinaryReader::Signed(int64_t* v, const char* what) {
  uint64_t z = 0;
  if (!Unsigned(&z, what)) return false;
  *v = static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  return true;
}

bool BinaryReader::Count(size_t* v, const char* what, size_t max) {
  uint64_t n = 0;
  if (!Unsigned(&n, what, max)) return false;
  if (n > in_.size() - pos_) {
    return Fail(what, std::to_string(n) + " elements cannot fit in the " +
                          std::to_string(in_.size() - pos_) + " bytes left");
  }
  *v = static_cast<size_t>(n);
  return true;
}

bool BinaryReader::Bytes(std::string_view* v, const char* what, size_t max) {
  uint64_t size = 0;
  if (!Unsigned(&size, what, max)) return false;
  if (size > in_.size() - pos_) {
    return Fail(what, std::to_string(size) + " bytes from byte " + std::to_string(pos_) +
                          " run past the end (" + std::to_string(in_.size()) + ")");
  }
  *v = in_.substr(pos_, size);
  pos_ += size;
  return true;
}

bool BinaryReader::String(std::string* v, const char* what, size_t max) {
  std::string_view bytes;
  if (!Bytes(&bytes, what, max)) return false;
  v->assign(bytes);
  return true;
}

}  // namespace drover::proto::internal
