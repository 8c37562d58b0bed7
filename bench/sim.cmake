# drover sim's benchmark: the standard synthetic trace (seed 1,
# 2,000 tasks, 4 workers x 4 GPUs) against its makespan lower bound, and the
# replay time of a 1,000,000-task trace. Run: build/bench/sim_bench (see
# bench/README.md).
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
add_executable(sim_bench ${CMAKE_CURRENT_LIST_DIR}/sim_bench.cc)
target_compile_options(sim_bench PRIVATE ${DROVER_WARNINGS})
target_link_libraries(sim_bench PRIVATE drover_sim CLI11::CLI11 nlohmann_json::nlohmann_json)
