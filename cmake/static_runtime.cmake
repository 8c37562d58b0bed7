# Drover's start-up cost (shared BENCH.md B4: a fresh `drover submit --wait`
# within 10 ms of a bare spawn). Every CLI command is a fresh process of the
# one drover binary, and on these VMs a process pays for each shared library
# it loads, each symbol the dynamic loader binds and each page a relocation
# writes (a first touch costs ~10 us). Measured on `drover --version`:
# libcrypto.so alone brings ~17,000 relocations, libstdc++.so ~3,300 symbol
# bindings; linking them in statically, and the binary without PIE, took it
# from 389 page faults and ~19 ms to 167 faults and ~7 ms.
#
# So, for every target of the tree:
#  - OpenSSL comes from libssl.a/libcrypto.a (Debian's libssl-dev has them);
#  - spdlog and fmt, which Debian ships only as shared libraries, are built
#    here as small static libraries from the implementation headers that
#    Debian does ship (cmake/static_runtime/*.cc), with the same compile
#    definitions as Debian's targets, under the same target names
#    (spdlog::spdlog, fmt::fmt), so no module's CMakeLists changes.
# The drover binary adds -static-libstdc++ -static-libgcc
# (src/cli/CMakeLists.txt): with spdlog and fmt static no shared library
# it loads needs libstdc++.so. It stays a PIE (see there for why).
#
# The price of a static OpenSSL: a security update of Debian's libssl3
# reaches drover only when it is rebuilt (`make build`); docs/guide.md says
# so.

# OpenSSL: FindOpenSSL looks for the .a files; a build directory configured
# before this file existed has the .so paths cached, so drop those once.
set(OPENSSL_USE_STATIC_LIBS TRUE)
foreach(var OPENSSL_SSL_LIBRARY OPENSSL_CRYPTO_LIBRARY)
  if(DEFINED CACHE{${var}} AND NOT "$CACHE{${var}}" MATCHES "\\.a$")
    unset(${var} CACHE)
  endif()
endforeach()

# fmt and spdlog. Debian's package files define two targets each and skip
# their own definitions when both already exist, so the names below are
# what every later find_package(spdlog) / find_package(fmt) hands out.
find_package(Threads REQUIRED)
find_path(DROVER_FMT_INCLUDE fmt/format-inl.h REQUIRED)
find_path(DROVER_SPDLOG_INCLUDE spdlog/spdlog-inl.h REQUIRED)

add_library(drover_fmt STATIC ${PROJECT_SOURCE_DIR}/cmake/static_runtime/fmt_lib.cc)
target_include_directories(drover_fmt SYSTEM PUBLIC ${DROVER_FMT_INCLUDE})
target_compile_definitions(drover_fmt PUBLIC FMT_SHARED)
set_target_properties(drover_fmt PROPERTIES POSITION_INDEPENDENT_CODE ON)
add_library(drover_fmt_header_only INTERFACE)
target_include_directories(drover_fmt_header_only SYSTEM INTERFACE ${DROVER_FMT_INCLUDE})
target_compile_definitions(drover_fmt_header_only INTERFACE FMT_HEADER_ONLY=1)
add_library(fmt::fmt ALIAS drover_fmt)
add_library(fmt::fmt-header-only ALIAS drover_fmt_header_only)

add_library(drover_spdlog STATIC ${PROJECT_SOURCE_DIR}/cmake/static_runtime/spdlog_lib.cc)
target_include_directories(drover_spdlog SYSTEM PUBLIC ${DROVER_SPDLOG_INCLUDE})
target_compile_definitions(drover_spdlog
                           PUBLIC SPDLOG_SHARED_LIB SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL)
target_link_libraries(drover_spdlog PUBLIC Threads::Threads fmt::fmt)
set_target_properties(drover_spdlog PROPERTIES POSITION_INDEPENDENT_CODE ON)
add_library(drover_spdlog_header_only INTERFACE)
target_include_directories(drover_spdlog_header_only SYSTEM INTERFACE ${DROVER_SPDLOG_INCLUDE})
target_compile_definitions(drover_spdlog_header_only INTERFACE SPDLOG_FMT_EXTERNAL)
target_link_libraries(drover_spdlog_header_only INTERFACE Threads::Threads fmt::fmt)
add_library(spdlog::spdlog ALIAS drover_spdlog)
add_library(spdlog::spdlog_header_only ALIAS drover_spdlog_header_only)
