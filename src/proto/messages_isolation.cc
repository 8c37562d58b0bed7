// An assignment's network, disk I/O limits and container image on the wire
// (messages_internal.h).
#include <optional>
#include <string>

#include "proto/messages_internal.h"

namespace drover::proto::internal {

void IsolationFieldsJson(const Assignment& a, Json& j) {
  if (a.private_network) j["network"] = "none";
  if (!a.image.empty()) j["image"] = a.image;
  if (a.image_pull != core::ImagePull::kMissing)
    j["image_pull"] = core::ImagePullName(a.image_pull);
  if (a.disk_bytes != 0) j["disk"] = a.disk_bytes;
  if (!a.io.Any()) return;
  Json io = Json::object();
  if (a.io.read_bps != 0) io["read_bps"] = a.io.read_bps;
  if (a.io.write_bps != 0) io["write_bps"] = a.io.write_bps;
  if (a.io.weight != 0) io["weight"] = a.io.weight;
  j["io"] = std::move(io);
}

bool ReadIsolationFields(ObjectReader& r, Assignment* a, DecodeContext& ctx) {
  std::string network;
  if (!r.String("network", &network, Need::kOptional)) return false;
  if (!network.empty() && network != "none" && network != "host") {
    return ctx.Fail(r.PathOf("network"), "expected \"none\" or \"host\", got \"" + network + "\"");
  }
  a->private_network = network == "none";
  std::string pull;
  if (!r.String("image", &a->image, Need::kOptional) ||
      !r.String("image_pull", &pull, Need::kOptional)) {
    return false;
  }
  if (!a->image.empty()) {
    if (std::string problem = core::ImageNameProblem(a->image); !problem.empty()) {
      return ctx.Fail(r.PathOf("image"), problem);
    }
  }
  if (!pull.empty()) {
    std::optional<core::ImagePull> parsed = core::ParseImagePull(pull);
    if (!parsed) {
      return ctx.Fail(r.PathOf("image_pull"),
                      "expected \"missing\", \"always\" or \"never\", got \"" + pull + "\"");
    }
    a->image_pull = *parsed;
  }
  if (!r.Integer("disk", &a->disk_bytes, Need::kOptional)) return false;
  const Json* io = r.Get("io", Need::kOptional);
  if (io == nullptr) return r.ok();
  ObjectReader limits(*io, r.PathOf("io"), ctx);
  if (!limits.RejectUnknown({"read_bps", "write_bps", "weight"}) ||
      !limits.Integer("read_bps", &a->io.read_bps, Need::kOptional) ||
      !limits.Integer("write_bps", &a->io.write_bps, Need::kOptional) ||
      !limits.Integer("weight", &a->io.weight, Need::kOptional)) {
    return false;
  }
  if (a->io.weight > core::kMaxIoWeight) {
    return ctx.Fail(limits.PathOf("weight"),
                    "must be at most " + std::to_string(core::kMaxIoWeight));
  }
  return true;
}

}  // namespace drover::proto::internal
