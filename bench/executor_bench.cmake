# B2a: the executor alone against a bare posix_spawn loop (BENCH.md).
add_executable(executor_bench ${CMAKE_CURRENT_LIST_DIR}/executor_bench.cc)
target_compile_options(executor_bench PRIVATE ${DROVER_WARNINGS})
target_link_libraries(executor_bench PRIVATE drover_worker_exec)
