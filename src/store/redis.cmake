# The RedisStore (DESIGN.md sections 4 and 6): hiredis's asynchronous API on
# net's asio event loop. hiredis and Asio headers stay in the .cc files.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
find_package(Boost 1.81 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(spdlog REQUIRED)

drover_library(drover_redis_store
  SOURCES
    redis_connection.cc
    redis_journal.cc
    redis_keys.cc
    redis_leases.cc
    redis_scripts.cc
    redis_server_store.cc
    redis_store.cc
    redis_url.cc
  DEPS drover_store drover_net Boost::headers spdlog::spdlog)
# hiredis from its static library when Debian's libhiredis-dev has it (it
# does): every CLI command then loads one shared library fewer
# (cmake/static_runtime.cmake). Only this library links hiredis this way;
# a test that calls hiredis itself links the shared one and not this.
find_library(DROVER_HIREDIS_STATIC libhiredis.a)
if(DROVER_HIREDIS_STATIC)
  target_include_directories(drover_redis_store SYSTEM PRIVATE ${HIREDIS_INCLUDE_DIRS})
  target_link_libraries(drover_redis_store PRIVATE ${DROVER_HIREDIS_STATIC} OpenSSL::Crypto)
else()
  target_link_libraries(drover_redis_store PRIVATE PkgConfig::HIREDIS OpenSSL::Crypto)
endif()

# Starts private redis-servers (tests/redis/); set DROVER_TEST_REDIS_URL to
# run the shared tests against an existing server instead.
drover_test(redis_store_test
  SOURCES
    redis_leases_test.cc
    redis_lost_wakeup_test.cc
    redis_server_store_test.cc
    redis_store_test.cc
    redis_url_test.cc
    ${PROJECT_SOURCE_DIR}/tests/redis/loop_runner.cc
    ${PROJECT_SOURCE_DIR}/tests/redis/redis_server.cc
  DEPS drover_redis_store drover_store_conformance)
target_include_directories(redis_store_test PRIVATE ${PROJECT_SOURCE_DIR})
