#include "sim/cluster.h"

#include <gtest/gtest.h>

#include "common/quantity.h"

namespace drover::sim {
namespace {

TEST(ClusterTest, ExpandsCountsIntoConcreteWorkers) {
  Result<Cluster> c = ParseCluster(R"({"workers":[
    {"name":"gpu","count":2,"cpus":4,"mem":"32GiB","gpus":2,"gpu_model":"NVIDIA A100","gpu_mem":"40GiB"},
    {"name":"cpu","cpus":8,"mem":1073741824}
  ]})",
                                   "c.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->workers.size(), 3u);
  EXPECT_EQ(c->workers[0].name, "gpu-1");
  EXPECT_EQ(c->workers[1].name, "gpu-2");
  EXPECT_EQ(c->workers[2].name, "cpu");
  EXPECT_EQ(c->workers[0].cpu_cores, (std::vector<uint32_t>{0, 1, 2, 3}));
  ASSERT_EQ(c->workers[1].gpus.size(), 2u);
  EXPECT_EQ(c->workers[1].gpus[1].index, 1u);
  EXPECT_EQ(c->workers[1].gpus[1].model, "NVIDIA A100");
  EXPECT_EQ(c->workers[1].gpus[1].memory_bytes, 40 * kGiB);
  EXPECT_TRUE(c->workers[2].gpus.empty());
  EXPECT_EQ(c->workers[2].mem_bytes, kGiB);
  for (const auto& w : c->workers) EXPECT_TRUE(w.Validate().ok());
  EXPECT_EQ(c->TotalCores(), 16u);
  EXPECT_EQ(c->TotalGpus(), 4u);
  EXPECT_EQ(c->TotalMemBytes(), 65 * kGiB);
}

TEST(ClusterTest, ErrorsNameTheWorkerAndTheField) {
  auto error = [](const std::string& text) {
    Result<Cluster> c = ParseCluster(text, "c.json");
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_EQ(error(R"({"workers":[{"cpus":1,"mem":"1GiB"},{"cpus":1,"mem":"4G"}]})")
                .rfind("c.json: workers[1]: mem: ", 0),
            0u);
  EXPECT_EQ(error(R"({"workers":[{"mem":"1GiB"}]})"), "c.json: workers[0]: cpus: missing (number of cores)");
  EXPECT_EQ(error(R"({"workers":[{"cpus":0,"mem":"1GiB"}]})").rfind("c.json: workers[0]: cpus: 0 is outside", 0),
            0u);
  EXPECT_EQ(error(R"({"workers":[{"cpus":1,"mem":"1GiB","gpu":1}]})")
                .rfind("c.json: workers[0]: unknown field \"gpu\"", 0),
            0u);
  EXPECT_EQ(error(R"({"workers":[{"name":"a","cpus":1,"mem":"1GiB"},{"name":"a","cpus":1,"mem":"1GiB"}]})")
                .rfind("c.json: workers[1]: name: worker \"a\" is defined twice", 0),
            0u);
  EXPECT_EQ(error(R"({"workers":[]})"), "c.json: workers: expected a non-empty list of workers");
  EXPECT_EQ(error(R"({"worker":[]})").rfind("c.json: unknown field \"worker\"", 0), 0u);
  EXPECT_EQ(error("{").rfind("c.json: invalid JSON: ", 0), 0u);
}

TEST(ClusterTest, StandardClusterIsFourWorkersOfFourGpus) {
  const Cluster c = StandardCluster();
  EXPECT_EQ(c.workers.size(), 4u);
  EXPECT_EQ(c.TotalGpus(), 16u);
  EXPECT_EQ(c.TotalCores(), 128u);
}

}  // namespace
}  // namespace drover::sim
