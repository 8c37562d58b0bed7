#include "worker/resources/nvidia_smi.h"

#include <cctype>
#include <charconv>

#include "common/quantity.h"
#include "common/run_program.h"

namespace drover::worker {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool NotAvailable(std::string_view field) {
  return field.starts_with('[') && field.ends_with(']');  // [N/A], [Not Supported]
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

Result<std::vector<NvidiaSmiRow>> ParseNvidiaSmiCsv(std::string_view text) {
  std::vector<NvidiaSmiRow> rows;
  int line_number = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_number;
    if (Trim(line).empty()) continue;
    auto bad = [&](std::string_view why) {
      return DataLoss("nvidia-smi output line " + std::to_string(line_number) + " \"" +
                      std::string(Trim(line)) + "\": " + std::string(why) +
                      " (expected: index, uuid, name, memory.total MiB, utilization %, "
                      "memory.used MiB)");
    };
    std::vector<std::string_view> f;
    for (std::string_view rest = line;;) {
      size_t comma = rest.find(',');
      f.push_back(Trim(rest.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (f.size() != 6) return bad(std::to_string(f.size()) + " fields instead of 6");
    NvidiaSmiRow row;
    if (!ParseNumber(f[0], &row.info.index) || row.info.index < 0) return bad("bad index");
    if (f[1].empty() || NotAvailable(f[1])) return bad("no uuid");
    if (f[2].empty()) return bad("no name");
    row.info.uuid = f[1];
    row.info.name = f[2];
    uint64_t mib = 0;
    if (!NotAvailable(f[3])) {
      if (!ParseNumber(f[3], &mib)) return bad("bad memory.total");
      row.info.memory_bytes = mib * kMiB;
    }
    row.sample.index = row.info.index;
    int util = 0;
    if (!NotAvailable(f[4])) {
      if (!ParseNumber(f[4], &util) || util < 0 || util > 100) return bad("bad utilization.gpu");
      row.sample.utilization_percent = util;
    }
    if (!NotAvailable(f[5])) {
      if (!ParseNumber(f[5], &mib)) return bad("bad memory.used");
      row.sample.memory_used_bytes = mib * kMiB;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::string> RunNvidiaSmi(const std::string& program, Duration timeout) {
  return RunProgram(
      {program, "--query-gpu=index,uuid,name,memory.total,utilization.gpu,memory.used",
       "--format=csv,noheader,nounits"},
      timeout);
}

Result<std::vector<NvidiaSmiRow>> NvidiaSmiGpuSource::Query() {
  ASSIGN_OR_RETURN(std::string out, RunNvidiaSmi(program_, timeout_));
  return ParseNvidiaSmiCsv(out);
}

Result<std::vector<GpuInfo>> NvidiaSmiGpuSource::List() {
  ASSIGN_OR_RETURN(std::vector<NvidiaSmiRow> rows, Query());
  std::vector<GpuInfo> gpus;
  for (NvidiaSmiRow& row : rows) gpus.push_back(std::move(row.info));
  return gpus;
}

Result<std::vector<GpuSample>> NvidiaSmiGpuSource::Sample() {
  Result<std::vector<NvidiaSmiRow>> rows = Query();
  if (!rows.ok()) return Unavailable(rows.status().message());
  std::vector<GpuSample> samples;
  for (const NvidiaSmiRow& row : *rows) samples.push_back(row.sample);
  return samples;
}

}  // namespace drover::worker
