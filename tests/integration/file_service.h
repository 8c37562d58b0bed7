// Helpers for tests of workers' file services (the data plane): the port a
// worker serves files on, a client that pins its certificate, and what it
// served (GET /v1/files-stats).
//
// Thread safety: the test's thread.
#ifndef DROVER_TESTS_INTEGRATION_FILE_SERVICE_H_
#define DROVER_TESTS_INTEGRATION_FILE_SERVICE_H_

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "cluster.h"
#include "net/http_client.h"
#include "net/tls_identity.h"

namespace drover::testing {

// The port a worker's file service listens on, from its start line (printed
// before the worker attached, which StartWorker waited for); 0: none.
inline uint16_t FilesPort(Process& worker) {
  const std::string& out = worker.output();
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("file service on port ([0-9]+)"))) return 0;
  return static_cast<uint16_t>(std::stoi(m[1]));
}

// A client for the file service of worker `name` (its certificate pinned).
inline net::HttpClient FilesClient(Cluster& c, const std::string& name, uint16_t port) {
  net::ClientOptions o = c.Api().options();
  std::ifstream in(c.dir() + "/workers/" + name + "/work/.files-tls/server.crt");
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Result<std::string> fingerprint = net::FingerprintOfPem(pem);
  EXPECT_TRUE(fingerprint.ok()) << fingerprint.status().ToString();
  o.host = "127.0.0.1";
  o.port = port;
  o.tls = true;
  o.local_socket.clear();
  o.alternates.clear();
  o.fingerprint = fingerprint.ok() ? *fingerprint : "";
  return net::HttpClient(o);
}

// What worker `name`'s file service served (GET /v1/files-stats).
inline nlohmann::json FilesStats(Cluster& c, const std::string& name, uint16_t port) {
  Result<net::Response> r = FilesClient(c, name, port).Get("/v1/files-stats");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return nlohmann::json();
  return nlohmann::json::parse(r->body, nullptr, false);
}

}  // namespace drover::testing

#endif  // DROVER_TESTS_INTEGRATION_FILE_SERVICE_H_
