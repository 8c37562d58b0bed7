# The worker agent shell (issue #4): the worker channel to the server,
# admission, inputs, results buffered until acknowledged, logs, reconnects
# and fencing, on one net::EventLoop. See agent.h.
drover_library(drover_agent
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/asio_reactor.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_convert.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_logs.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent.cc
  DEPS drover_worker_exec drover_worker_resources drover_wire drover_net)

drover_test(agent_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/agent_convert_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_logs_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/agent_test.cc
  DEPS drover_agent)
