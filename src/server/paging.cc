#include "server/paging.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <string>

namespace drover::server {

namespace {

Result<uint32_t> U32(const net::Request& r, const std::string& name, uint32_t fallback) {
  auto it = r.query.find(name);
  if (it == r.query.end()) return fallback;
  const std::string& text = it->second;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    // `text` may hold any bytes; the error body's encoder replaces what is
    // not UTF-8.
    return InvalidArgument(name + ": expected an unsigned integer, got \"" + text + "\"");
  }
  return v;
}

}  // namespace

Result<Page> ParsePage(const net::Request& request, std::initializer_list<std::string_view> also) {
  for (const auto& [key, value] : request.query) {
    if (key == "offset" || key == "limit") continue;
    if (std::find(also.begin(), also.end(), key) != also.end()) continue;
    std::string known = "offset, limit";
    for (std::string_view a : also) known += ", " + std::string(a);
    return InvalidArgument("unknown query parameter \"" + key + "\" (known: " + known + ")");
  }
  Page page;
  ASSIGN_OR_RETURN(page.offset, U32(request, "offset", 0));
  ASSIGN_OR_RETURN(page.limit, U32(request, "limit", kDefaultPageTasks));
  if (page.limit > kMaxPageTasks) {
    return InvalidArgument("limit: at most " + std::to_string(kMaxPageTasks) +
                           " tasks per page, got " + std::to_string(page.limit));
  }
  return page;
}

std::optional<uint64_t> NextOffset(const Page& page, uint64_t count) {
  const uint64_t end = static_cast<uint64_t>(page.offset) + page.limit;
  if (page.limit == 0 || end >= count) return std::nullopt;
  return end;
}

void PutPage(nlohmann::json& body, const Page& page, uint64_t count) {
  body["offset"] = page.offset;
  body["limit"] = page.limit;
  const std::optional<uint64_t> next = NextOffset(page, count);
  body["next_offset"] = next ? nlohmann::json(*next) : nlohmann::json(nullptr);
}

}  // namespace drover::server
