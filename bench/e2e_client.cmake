# bench/e2e's client (B2-B4, BENCH.md): submits through the REST API and
# waits on the event stream; bench/e2e starts the cluster and the baselines.
find_package(nlohmann_json REQUIRED)
add_executable(e2e_client ${CMAKE_CURRENT_LIST_DIR}/e2e_client.cc)
target_compile_options(e2e_client PRIVATE ${DROVER_WARNINGS})
target_link_libraries(e2e_client PRIVATE drover_cli drover_net nlohmann_json::nlohmann_json)
