# The worker agent (issue #4, split in issue 20): a pure state machine
# (worker_state.*: the protocol, queue-ahead, results until acknowledged,
# fencing) with no network, and the shell (agent.*) that ties it to the
# server link, the executor, timers and the reaper on one net::EventLoop.
# See agent.h and worker_state.h.
drover_library(drover_worker_state
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/agent_convert.cc
    ${CMAKE_CURRENT_LIST_DIR}/worker_state.cc
  DEPS drover_worker_exec drover_worker_resources drover_wire)

drover_library(drover_agent
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/asio_reactor.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_logs.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent.cc
  DEPS drover_worker_state drover_worker_exec drover_worker_resources drover_wire drover_net)
# Agent::Impl holds the TaskGuard of agent.cc's anonymous namespace.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/agent.cc
  PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)

# The state machine's tests: simulated time, recorded outboxes, no
# processes and no network.
drover_test(worker_state_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/worker_state_test.cc
  DEPS drover_worker_state)

drover_test(agent_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/agent_convert_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_logs_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_shell_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_test.cc
  DEPS drover_agent)
