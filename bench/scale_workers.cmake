# bench/scale's fake workers (BENCH.md B6): N worker connections
# in one process, each the agent's own state machine with a shell that runs
# nothing.
find_package(CLI11 REQUIRED)
add_executable(scale_workers ${CMAKE_CURRENT_LIST_DIR}/scale_workers.cc)
target_compile_options(scale_workers PRIVATE ${DROVER_WARNINGS})
target_link_libraries(scale_workers PRIVATE drover_worker_state drover_net drover_wire
                      CLI11::CLI11 nlohmann_json::nlohmann_json)
