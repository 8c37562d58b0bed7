// Maps (method, path) to a handler. Patterns are literal segments,
// `{name}` segments that capture one segment into Request::path_params, and
// a final `*` that captures the rest of the path (possibly empty) as "*":
//
//   "/api/v1/jobs/{id}/cancel"   "/assets/*"
//
// The first registered route that matches wins. Error messages show the
// path through Printable: it is what a peer sent.
//
// Thread safety: not synchronised. Add routes before the server starts, then
// only Match (from the event-loop thread).
#ifndef DROVER_NET_ROUTER_H_
#define DROVER_NET_ROUTER_H_

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/http_types.h"

namespace drover::net {

template <typename Target>
class Router {
 public:
  void Add(std::string method, std::string pattern, Target target) {
    routes_.push_back({std::move(method), Split(pattern), std::move(target)});
  }

  // On success, the target and the captured parameters. kNotFound if no
  // pattern matches the path; kFailedPrecondition ("method not allowed") if
  // patterns match the path but none with this method (callers answer 405).
  struct Match {
    const Target* target = nullptr;
    std::map<std::string, std::string> params;
  };
  Result<Match> Find(const std::string& method, const std::string& path) const {
    std::vector<std::string> segments = Split(path);
    bool path_matched = false;
    for (const Route& route : routes_) {
      Match m;
      if (!MatchSegments(route.segments, segments, &m.params)) continue;
      path_matched = true;
      if (route.method != method && !route.method.empty()) continue;
      m.target = &route.target;
      return m;
    }
    if (path_matched) {
      return FailedPrecondition("method " + Printable(method) + " not allowed on " + Printable(path));
    }
    return NotFound("no route for " + Printable(path));
  }

  bool empty() const { return routes_.empty(); }

  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < path.size()) {
      if (path[i] == '/') {
        ++i;
        continue;
      }
      size_t next = path.find('/', i);
      if (next == std::string::npos) next = path.size();
      out.push_back(path.substr(i, next - i));
      i = next;
    }
    return out;
  }

 private:
  struct Route {
    std::string method;  // empty matches any method
    std::vector<std::string> segments;
    Target target;
  };

  static bool MatchSegments(const std::vector<std::string>& pattern,
                            const std::vector<std::string>& path,
                            std::map<std::string, std::string>* params) {
    for (size_t i = 0; i < pattern.size(); ++i) {
      const std::string& p = pattern[i];
      if (p == "*" && i + 1 == pattern.size()) {
        std::string rest;
        for (size_t j = i; j < path.size(); ++j) {
          if (!rest.empty()) rest += '/';
          rest += path[j];
        }
        (*params)["*"] = rest;
        return true;
      }
      if (i >= path.size()) return false;
      if (p.size() >= 2 && p.front() == '{' && p.back() == '}') {
        (*params)[p.substr(1, p.size() - 2)] = path[i];
      } else if (p != path[i]) {
        return false;
      }
    }
    return pattern.size() == path.size();
  }

  std::vector<Route> routes_;
};

}  // namespace drover::net

#endif  // DROVER_NET_ROUTER_H_
