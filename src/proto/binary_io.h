// BinaryWriter and BinaryReader: the few primitives of the compact binary
// encodings (the journal's hot records, record_codec.h): unsigned integers
// as LEB128 varints, signed ones zigzagged first, strings and lists behind
// their length. A varint of a small number is one byte, so an encoded record
// is about a tenth of its JSON.
//
// The reader never reads past its input and never allocates more than the
// input could hold: a length is checked against the bytes left before a
// string is made, and a count against the caller's limit. The first failed
// read stops it and keeps what failed and where (`error()`: "attempt:
// truncated at byte 12"); later reads fail too, so a decoder may read
// every field and check once.
//
// Thread safety: plain values.
#ifndef DROVER_PROTO_BINARY_IO_H_
#define DROVER_PROTO_BINARY_IO_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace drover::proto::internal {

class BinaryWriter {
 public:
  explicit BinaryWriter(std::string* out) : out_(out) {}

  void Byte(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void Unsigned(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<char>(v));
  }
  void Signed(int64_t v) {
    Unsigned((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void String(std::string_view s) {
    Unsigned(s.size());
    out_->append(s);
  }

 private:
  std::string* out_;
};

class BinaryReader {
 public:
  explicit BinaryReader(std::string_view in) : in_(in) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // True when every byte was read (and nothing failed).
  bool AtEnd() const { return ok() && pos_ == in_.size(); }
  size_t position() const { return pos_; }

  bool Byte(uint8_t* v, const char* what);
  // At most `max`.
  bool Unsigned(uint64_t* v, const char* what, uint64_t max = UINT64_MAX);
  template <typename T>
  bool UnsignedAs(T* v, const char* what, uint64_t max) {
    uint64_t x = 0;
    if (!Unsigned(&x, what, max)) return false;
    *v = static_cast<T>(x);
    return true;
  }
  bool Signed(int64_t* v, const char* what);
  // A list's length: at most `max`, and at most the bytes left (each
  // element takes one at least), so a forged count allocates nothing.
  bool Count(size_t* v, const char* what, size_t max);
  bool String(std::string* v, const char* what, size_t max);
  // As String, but a view into the input (which must outlive it).
  bool Bytes(std::string_view* v, const char* what, size_t max);
  // Marks the reader failed with `what` and `problem` (a check the caller
  // made of a value it read); returns false.
  bool Fail(const char* what, const std::string& problem);

 private:
  std::string_view in_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace drover::proto::internal

#endif  // DROVER_PROTO_BINARY_IO_H_
