#include "common/quantity.h"

#include <cctype>
#include <charconv>
#include <limits>

namespace drover {
namespace {

std::string Quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A non-negative decimal number split into integer and fraction digits.
struct Decimal {
  uint64_t whole = 0;
  std::string_view fraction;  // digits after the point, may be empty
};

// Parses the leading decimal number of `s` into `out`; returns the rest of
// `s` (the unit) or nullopt-like empty when there is no number.
bool ParseDecimal(std::string_view s, Decimal* out, std::string_view* rest) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + i, out->whole);
  if (ec != std::errc()) return false;
  size_t j = i;
  if (j < s.size() && s[j] == '.') {
    ++j;
    size_t k = j;
    while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
    if (k == j) return false;  // "1." is not a number
    out->fraction = s.substr(j, k - j);
    j = k;
  }
  *rest = s.substr(j);
  return true;
}

__extension__ typedef unsigned __int128 U128;

// whole.fraction * scale, exact; fails if the result is not a whole number
// of units (too many decimals) or overflows.
bool Scale(const Decimal& d, uint64_t scale, uint64_t* out) {
  if (d.fraction.size() > 18) return false;
  U128 num = 0;
  U128 den = 1;
  for (char c : d.fraction) {
    num = num * 10 + static_cast<unsigned>(c - '0');
    den *= 10;
  }
  U128 frac = num * scale;
  if (frac % den != 0) return false;
  U128 v = static_cast<U128>(d.whole) * scale + frac / den;
  if (v > std::numeric_limits<uint64_t>::max()) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

}  // namespace

Result<int64_t> ParseCpus(std::string_view text) {
  std::string_view s = Trim(text);
  Decimal d;
  std::string_view unit;
  if (!ParseDecimal(s, &d, &unit)) {
    return InvalidArgument("cpus " + Quoted(text) + " is not a number (examples: 2, 0.5, 500m)");
  }
  uint64_t milli = 0;
  if (unit == "m") {
    if (!d.fraction.empty() || !Scale(d, 1, &milli)) {
      return InvalidArgument("cpus " + Quoted(text) + ": milli-cpus must be a whole number");
    }
  } else if (unit.empty()) {
    if (!Scale(d, 1000, &milli)) {
      return InvalidArgument("cpus " + Quoted(text) +
                             " has more than 3 decimals (the finest unit is 0.001 = 1m)");
    }
  } else {
    return InvalidArgument("cpus " + Quoted(text) + " has unknown unit " + Quoted(unit) +
                           " (examples: 2, 0.5, 500m)");
  }
  if (milli > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("cpus " + Quoted(text) + " is too large");
  }
  return static_cast<int64_t>(milli);
}

Result<uint64_t> ParseBytes(std::string_view text) {
  std::string_view s = Trim(text);
  Decimal d;
  std::string_view unit;
  if (!ParseDecimal(s, &d, &unit)) {
    return InvalidArgument("memory " + Quoted(text) +
                           " is not a quantity (examples: 512MiB, 4GiB, 4GB)");
  }
  unit = Trim(unit);
  struct Unit {
    std::string_view name;
    uint64_t scale;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},           {"B", 1},
      {"KiB", 1ULL << 10}, {"Ki", 1ULL << 10}, {"MiB", 1ULL << 20}, {"Mi", 1ULL << 20},
      {"GiB", 1ULL << 30}, {"Gi", 1ULL << 30}, {"TiB", 1ULL << 40}, {"Ti", 1ULL << 40},
      {"kB", 1000ULL},   {"KB", 1000ULL},     {"MB", 1000000ULL},  {"GB", 1000000000ULL},
      {"TB", 1000000000000ULL},
  };
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    uint64_t bytes = 0;
    if (!Scale(d, u.scale, &bytes)) {
      return InvalidArgument("memory " + Quoted(text) +
                             " is not a whole number of bytes or is too large");
    }
    return bytes;
  }
  if (unit == "K" || unit == "k" || unit == "M" || unit == "G" || unit == "T" ||
      unit == "m" || unit == "g" || unit == "t") {
    std::string num(s.substr(0, s.size() - unit.size()));
    std::string upper(1, static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    std::string bin = num + upper + "iB";
    std::string dec = num + (upper == "K" ? "kB" : upper + "B");
    return InvalidArgument("memory " + Quoted(text) + " is ambiguous: write " + bin +
                           " (powers of 1024) or " + dec + " (powers of 1000)");
  }
  return InvalidArgument("memory " + Quoted(text) + " has unknown unit " + Quoted(unit) +
                         " (accepted: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)");
}

Result<int64_t> ParseGpus(std::string_view text) {
  std::string_view s = Trim(text);
  Decimal d;
  std::string_view unit;
  if (!ParseDecimal(s, &d, &unit) || !unit.empty()) {
    return InvalidArgument("gpus " + Quoted(text) + " is not a number (examples: 1, 2, 0.25)");
  }
  uint64_t hundredths = 0;
  if (!Scale(d, 100, &hundredths)) {
    return InvalidArgument("gpus " + Quoted(text) +
                           " has more than 2 decimals (the finest share is 0.01)");
  }
  if (hundredths > 100 && hundredths % 100 != 0) {
    return InvalidArgument("gpus " + Quoted(text) +
                           ": a fraction must be below 1 (a share lives on one GPU); "
                           "above 1 use whole GPUs");
  }
  if (hundredths > 100 * 1024) return InvalidArgument("gpus " + Quoted(text) + " is too large");
  return static_cast<int64_t>(hundredths);
}

Result<Duration> ParseDuration(std::string_view text) {
  std::string_view s = Trim(text);
  if (s == "0") return Duration(0);
  if (s.empty()) return InvalidArgument("duration is empty (examples: 90s, 2h, 1d, 1h30m)");
  int64_t total = 0;
  while (!s.empty()) {
    Decimal d;
    std::string_view rest;
    if (!ParseDecimal(s, &d, &rest)) {
      return InvalidArgument("duration " + Quoted(text) +
                             " is not a duration (examples: 90s, 2h, 1d, 1h30m)");
    }
    size_t n = 0;
    while (n < rest.size() && std::isalpha(static_cast<unsigned char>(rest[n]))) ++n;
    std::string_view unit = rest.substr(0, n);
    uint64_t scale = 0;
    if (unit == "ms") scale = 1000;
    else if (unit == "s") scale = 1000000;
    else if (unit == "m") scale = 60ULL * 1000000;
    else if (unit == "h") scale = 3600ULL * 1000000;
    else if (unit == "d") scale = 86400ULL * 1000000;
    else if (unit.empty()) {
      return InvalidArgument("duration " + Quoted(text) +
                             " needs a unit (ms, s, m, h, d), for example 90s");
    } else {
      return InvalidArgument("duration " + Quoted(text) + " has unknown unit " + Quoted(unit) +
                             " (accepted: ms, s, m, h, d)");
    }
    uint64_t us = 0;
    if (!Scale(d, scale, &us) || us > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - total)) {
      return InvalidArgument("duration " + Quoted(text) + " is too precise or too large");
    }
    total += static_cast<int64_t>(us);
    s = rest.substr(n);
  }
  return Duration(total);
}

std::string FormatCpus(int64_t milli) {
  std::string out = std::to_string(milli / 1000);
  int64_t frac = milli % 1000;
  if (frac != 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

std::string FormatGpus(int64_t hundredths) {
  std::string out = std::to_string(hundredths / 100);
  int64_t frac = hundredths % 100;
  if (frac != 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 2 - f.size(), '0');
    if (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  uint64_t scale = 1;
  while (i < 4 && bytes >= scale * 1024) {
    scale *= 1024;
    ++i;
  }
  if (bytes % scale == 0) return std::to_string(bytes / scale) + " " + kNames[i];
  // One decimal, rounded; enough for a person reading a reason.
  uint64_t tenths = (bytes * 10 + scale / 2) / scale;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " " + kNames[i];
}

std::string FormatDuration(Duration d) {
  int64_t us = d.count();
  if (us == 0) return "0s";
  std::string out;
  if (us < 0) {
    out = "-";
    us = -us;
  }
  if (us < 1000000) {
    if (us % 1000 == 0) return out + std::to_string(us / 1000) + "ms";
    return out + std::to_string(us) + "us";
  }
  int64_t secs = us / 1000000;
  struct Part {
    int64_t size;
    const char* name;
  };
  static constexpr Part kParts[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  for (const Part& p : kParts) {
    if (secs >= p.size) {
      out += std::to_string(secs / p.size) + p.name;
      secs %= p.size;
    }
  }
  int64_t ms = (us % 1000000) / 1000;
  if (ms != 0) out += std::to_string(ms) + "ms";
  return out;
}

}  // namespace drover
