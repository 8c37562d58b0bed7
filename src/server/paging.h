// Paging: how a read of a job's tasks is bounded.
//
// GET /api/v1/jobs/{id} and GET /api/v1/jobs/{id}/report return one page of
// the job's tasks: `?offset=` (first task index, default 0) and `?limit=`
// (how many, default kDefaultPageTasks, at most kMaxPageTasks). The answer
// names the page ("offset", "limit") and the next one ("next_offset", null
// after the last page), so a client that needs every task asks again with
// offset = next_offset until it is null. An offset at or past the end gives
// an empty page. The cap is what keeps one request's time on the event loop
// small: encoding a task takes ~10 us on an idle machine (~50 us on a loaded
// one), so a page of 1,000 holds the loop ~10 ms (bench/README.md).
//
// Thread safety: pure functions.
#ifndef DROVER_SERVER_PAGING_H_
#define DROVER_SERVER_PAGING_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "net/http_types.h"

namespace drover::server {

inline constexpr uint32_t kDefaultPageTasks = 1000;
inline constexpr uint32_t kMaxPageTasks = 1000;

struct Page {
  uint32_t offset = 0;
  uint32_t limit = kDefaultPageTasks;
};

// Reads ?offset= and ?limit= of `request`. Errors (kInvalidArgument, for a
// 400): a value that is not an unsigned integer ("limit: expected an
// unsigned integer, got \"x\""), a limit above kMaxPageTasks ("limit: at
// most 1000 tasks per page, got 2000"), and a query parameter that is
// neither of the two nor in `also` ("unknown query parameter \"ofset\"
// (known: offset, limit)").
Result<Page> ParsePage(const net::Request& request,
                       std::initializer_list<std::string_view> also = {});

// The page's end for a job of `count` tasks: next_offset when tasks remain
// after it, else nullopt.
std::optional<uint64_t> NextOffset(const Page& page, uint64_t count);

// Adds "offset", "limit" and "next_offset" (a number or null) to `body`.
void PutPage(nlohmann::json& body, const Page& page, uint64_t count);

}  // namespace drover::server

#endif  // DROVER_SERVER_PAGING_H_
