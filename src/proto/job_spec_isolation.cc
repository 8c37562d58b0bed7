// A task group's isolation keys beyond its resources: `network`, `disk`,
// `io_read_bps`, `io_write_bps`, `io_weight`, `image` and `image_pull`
// (job_spec_json.h).
#include <optional>
#include <string>

#include "common/quantity.h"
#include "proto/job_spec_json.h"
#include "proto/json_type_name.h"

namespace drover::proto::internal {

bool ReadBytes(const Json& j, const std::string& path, uint64_t* out, DecodeContext& ctx) {
  if (j.is_string()) {
    Result<uint64_t> bytes = ParseBytes(j.get_ref<const std::string&>());
    if (!bytes.ok()) return ctx.Fail(path, bytes.status().message());
    *out = *bytes;
    return true;
  }
  if (j.is_number_integer()) return ReadUint64(j, path, UINT64_MAX, out, ctx);
  return ctx.Fail(path, std::string("expected a string with a unit (\"4GiB\") or an integer "
                                    "number of bytes, got ") +
                            (j.is_number_float() ? "number " + Dump(j) : JsonTypeName(j)));
}

bool ReadImage(ObjectReader& r, core::TaskGroupSpec* g, DecodeContext& ctx) {
  if (const Json* i = r.Get("image", Need::kOptional)) {
    if (!ReadString(*i, r.PathOf("image"), &g->image, ctx)) return false;
    if (std::string problem = core::ImageNameProblem(g->image); !problem.empty()) {
      return ctx.Fail(r.PathOf("image"), problem);
    }
    g->resources.container = true;
  }
  if (const Json* p = r.Get("image_pull", Need::kOptional)) {
    std::string pull;
    if (!ReadString(*p, r.PathOf("image_pull"), &pull, ctx)) return false;
    std::optional<core::ImagePull> parsed = core::ParseImagePull(pull);
    if (!parsed) {
      return ctx.Fail(r.PathOf("image_pull"),
                      "unknown image_pull \"" + pull +
                          "\"; expected \"missing\" (fetch it when the worker lacks it, the "
                          "default), \"always\" or \"never\" (only what the worker has)");
    }
    if (g->image.empty()) {
      return ctx.Fail(r.PathOf("image_pull"), "is set without an image");
    }
    g->image_pull = *parsed;
  }
  return true;
}

bool ReadIsolation(ObjectReader& r, core::TaskGroupSpec* g, DecodeContext& ctx) {
  if (!ReadImage(r, g, ctx)) return false;
  if (const Json* n = r.Get("network", Need::kOptional)) {
    std::string mode;
    if (!ReadString(*n, r.PathOf("network"), &mode, ctx)) return false;
    if (mode != "none" && mode != "host") {
      return ctx.Fail(r.PathOf("network"),
                      "unknown network \"" + mode +
                          "\"; expected \"host\" (the worker's network, the default) or \"none\" "
                          "(a network of its own with only loopback)");
    }
    g->resources.private_network = mode == "none";
  }
  for (auto [key, out] :
       {std::pair{"io_read_bps", &g->io.read_bps}, std::pair{"io_write_bps", &g->io.write_bps}}) {
    const Json* v = r.Get(key, Need::kOptional);
    if (v == nullptr) continue;
    if (!ReadBytes(*v, r.PathOf(key), out, ctx)) return false;
    if (*out == 0) {
      return ctx.Fail(r.PathOf(key),
                      "must be above zero: bytes per second, such as \"10MiB\" (leave it out for "
                      "no limit)");
    }
  }
  if (const Json* d = r.Get("disk", Need::kOptional)) {
    if (!ReadBytes(*d, r.PathOf("disk"), &g->resources.disk_bytes, ctx)) return false;
    if (g->resources.disk_bytes == 0) {
      return ctx.Fail(r.PathOf("disk"),
                      "must be above zero: the most its directory may hold, such as \"20GiB\" "
                      "(leave it out for no limit)");
    }
  }
  if (const Json* w = r.Get("io_weight", Need::kOptional)) {
    uint64_t weight = 0;
    if (!ReadUint64(*w, r.PathOf("io_weight"), UINT32_MAX, &weight, ctx)) return false;
    if (weight == 0 || weight > core::kMaxIoWeight) {
      return ctx.Fail(r.PathOf("io_weight"),
                      std::to_string(weight) + ": expected 1 to " +
                          std::to_string(core::kMaxIoWeight) +
                          " (its share of the disk against other tasks', 100 without one)");
    }
    g->io.weight = static_cast<uint32_t>(weight);
  }
  return true;
}

void IsolationJson(const core::TaskGroupSpec& g, Json& j) {
  if (g.resources.private_network) j["network"] = "none";
  if (g.io.read_bps != 0) j["io_read_bps"] = g.io.read_bps;
  if (g.io.write_bps != 0) j["io_write_bps"] = g.io.write_bps;
  if (g.io.weight != 0) j["io_weight"] = g.io.weight;
  if (g.resources.disk_bytes != 0) j["disk"] = g.resources.disk_bytes;
  if (!g.image.empty()) j["image"] = g.image;
  if (g.image_pull != core::ImagePull::kMissing) {
    j["image_pull"] = core::ImagePullName(g.image_pull);
  }
}

}  // namespace drover::proto::internal
