#include "server/worker_registry.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "net/private_file.h"

namespace drover::server {

namespace {

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[md[i] >> 4]);
    hex.push_back(kHex[md[i] & 15]);
  }
  return hex;
}

}  // namespace

Result<std::unique_ptr<WorkerRegistry>> WorkerRegistry::Open(std::string path) {
  std::unique_ptr<WorkerRegistry> reg(new WorkerRegistry(path));
  Result<std::string> text = net::ReadWholeFile(path);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return reg;
    return text.status();
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("next_id") || !j["next_id"].is_number_unsigned() ||
      !j.contains("workers") || !j["workers"].is_object()) {
    return InvalidArgument(path + ": not a worker map (want {\"next_id\": N, \"workers\": {}})");
  }
  reg->state_.next_id = j["next_id"].get<WorkerId>();
  for (const auto& [name, id] : j["workers"].items()) {
    if (!id.is_number_unsigned() || id.get<WorkerId>() == 0 ||
        id.get<WorkerId>() >= reg->state_.next_id) {
      return InvalidArgument(path + ": bad id for worker \"" + name + "\"");
    }
    reg->state_.ids[name] = id.get<WorkerId>();
  }
  if (j.contains("keys")) {
    if (!j["keys"].is_object()) return InvalidArgument(path + ": \"keys\" is not an object");
    for (const auto& [name, hash] : j["keys"].items()) {
      if (!hash.is_string() || hash.get<std::string>().size() != 64) {
        return InvalidArgument(path + ": bad key hash for worker \"" + name + "\"");
      }
      reg->state_.keys[name] = hash.get<std::string>();
    }
  }
  if (!j.contains("active")) {
    for (const auto& [name, id] : reg->state_.ids) reg->state_.active.insert(id);
    return reg;
  }
  if (!j["active"].is_array()) return InvalidArgument(path + ": \"active\" is not a list of ids");
  for (const auto& id : j["active"]) {
    if (!id.is_number_unsigned() || id.get<WorkerId>() == 0 ||
        id.get<WorkerId>() >= reg->state_.next_id) {
      return InvalidArgument(path + ": bad id " + id.dump() + " in \"active\"");
    }
    reg->state_.active.insert(id.get<WorkerId>());
  }
  return reg;
}

Result<std::optional<std::string>> WorkerRegistry::KeyToRecord(const std::string& name,
                                                               const std::string& key) const {
  if (key.size() < 32 || key.size() > 256) {
    return InvalidArgument("worker key of " + std::to_string(key.size()) +
                           " characters; want 32 to 256 (a worker older than this server sends "
                           "none: upgrade it)");
  }
  std::string hash = Sha256Hex(key);
  auto it = state_.keys.find(name);
  if (it == state_.keys.end()) return std::optional<std::string>(std::move(hash));
  if (CRYPTO_memcmp(it->second.data(), hash.data(), hash.size()) == 0) {
    return std::optional<std::string>();
  }
  return PermissionDenied(
      "worker name \"" + name +
      "\" belongs to another worker (its key differs from the one "
      "this server recorded for that name). Start this worker under another --name; or, if it "
      "is the same machine and it lost its worker.key, stop the server and remove \"" +
      name + "\" from \"keys\" in " + path_);
}

Result<WorkerId> WorkerRegistry::Admit(const std::string& name, const std::string& key) {
  ASSIGN_OR_RETURN(WorkerId id, Stage(name, key));
  RETURN_IF_ERROR(Commit());
  return id;
}

Result<WorkerId> WorkerRegistry::Stage(const std::string& name, const std::string& key) {
  ASSIGN_OR_RETURN(std::optional<std::string> hash, KeyToRecord(name, key));
  const std::optional<WorkerId> known = Find(name);
  const WorkerId id = known ? *known : state_.next_id;
  const bool activate = state_.active.count(id) == 0;
  if (!hash && known && !activate) return id;
  BeginChange();
  if (hash) state_.keys[name] = std::move(*hash);
  if (!known) {
    state_.ids[name] = id;
    ++state_.next_id;
  }
  if (activate) state_.active.insert(id);
  return id;
}

void WorkerRegistry::StageInactive(WorkerId id) {
  if (state_.active.count(id) == 0) return;
  BeginChange();
  state_.active.erase(id);
}

void WorkerRegistry::BeginChange() {
  if (!before_) before_ = std::make_unique<State>(state_);
}

Status WorkerRegistry::Commit() {
  if (!before_) return Status::Ok();
  Status saved = Save();
  if (!saved.ok()) state_ = std::move(*before_);
  before_.reset();
  return saved;
}

std::optional<WorkerId> WorkerRegistry::Find(const std::string& name) const {
  auto it = state_.ids.find(name);
  if (it == state_.ids.end()) return std::nullopt;
  return it->second;
}

std::vector<WorkerId> WorkerRegistry::Ids() const {
  std::vector<WorkerId> ids;
  ids.reserve(state_.ids.size());
  for (const auto& [name, id] : state_.ids) ids.push_back(id);
  return ids;
}

std::vector<WorkerId> WorkerRegistry::Active() const {
  return std::vector<WorkerId>(state_.active.begin(), state_.active.end());
}

Status WorkerRegistry::MarkInactive(WorkerId id) {
  StageInactive(id);
  return Commit();
}

std::string WorkerRegistry::NameOf(WorkerId id) const {
  for (const auto& [name, known] : state_.ids) {
    if (known == id) return name;
  }
  return {};
}

Status WorkerRegistry::Save() {
  ++writes_;
  nlohmann::json workers = nlohmann::json::object();
  for (const auto& [name, id] : state_.ids) workers[name] = id;
  nlohmann::json active = nlohmann::json::array();
  for (WorkerId id : state_.active) active.push_back(id);
  nlohmann::json keys = nlohmann::json::object();
  for (const auto& [name, hash] : state_.keys) keys[name] = hash;
  nlohmann::json j{
      {"next_id", state_.next_id}, {"workers", workers}, {"active", active}, {"keys", keys}};
  return net::WritePrivateFile(path_, j.dump(1) + "\n");
}

}  // namespace drover::server
