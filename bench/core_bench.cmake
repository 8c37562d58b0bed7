# B1 (BENCH.md): the scheduling core alone, driven through its event API
# with a simulated clock. Run: build/bench/core_bench (see bench/README.md).
add_executable(core_bench ${CMAKE_CURRENT_LIST_DIR}/core_bench.cc)
target_compile_options(core_bench PRIVATE ${DROVER_WARNINGS})
target_link_libraries(core_bench PRIVATE drover_core)
