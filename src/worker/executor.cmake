# Executor part of the worker (issue #3): spawning, isolation, output
# capture, admission (Slots) and fencing. See executor.h and isolator.h.
drover_library(drover_worker_exec
  SOURCES
    event_loop.cc
    spawn.cc
    command_cache.cc
    output_capture.cc
    cgroup_files.cc
    isolator.cc
    cgroup_v1.cc
    cgroup_v2.cc
    rlimit.cc
    executor.cc
    reaper.cc
    life_record.cc
    slots.cc
    fencing.cc
  DEPS drover_common)
# ParkedProcess::Storage holds spawn.cc's ChildArgs (anonymous namespace).
set_source_files_properties(spawn.cc PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)

# A tiny program the tests run as a task: allocate, burn CPU, print, fork.
add_executable(exec_test_helper exec_test_helper.cc)
target_compile_options(exec_test_helper PRIVATE ${DROVER_WARNINGS})
set_target_properties(exec_test_helper PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

drover_test(worker_exec_test
  SOURCES
    event_loop_test.cc
    spawn_test.cc
    command_cache_test.cc
    output_capture_test.cc
    isolator_test.cc
    cgroup_v2_test.cc
    executor_test.cc
    executor_cgroup_test.cc
    reaper_test.cc
    life_record_test.cc
    slots_test.cc
    fencing_test.cc
  DEPS drover_worker_exec)
add_dependencies(worker_exec_test exec_test_helper)
target_compile_definitions(worker_exec_test PRIVATE
  DROVER_EXEC_TEST_HELPER="$<TARGET_FILE:exec_test_helper>")
