# Helpers shared by every CMakeLists in the tree.

# drover_library(NAME SOURCES... [DEPS libs...])
# A static library of Drover's own code with the project's warnings.
function(drover_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${DROVER_WARNINGS})
  if(ARG_DEPS)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  endif()
endfunction()

# drover_test(NAME SOURCES... [DEPS libs...])
# One GoogleTest binary per module, registered with ctest under NAME.
function(drover_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_compile_options(${name} PRIVATE ${DROVER_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  # GoogleTest, GoogleMock and nlohmann/json, which nearly every test file
  # includes, parsed once per binary (issue 20: build time).
  target_precompile_headers(${name} PRIVATE <gtest/gtest.h> <gmock/gmock.h> <nlohmann/json.hpp>)
  # GCC 12 inlines std::string's copies differently with the precompiled
  # header and then reports -Warray-bounds, -Wstringop-overflow and
  # -Wrestrict on string concatenations and lists of strings that are
  # correct (GCC bugs 105329, 105651): off for test code only.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${name} PRIVATE -Wno-array-bounds -Wno-stringop-overflow -Wno-restrict)
  endif()
  # ccache caches a compilation that uses a precompiled header only with
  # these relaxations (its manual, "Precompiled headers"): the .gch is made
  # just before the files that use it, and holds macros and timestamps.
  if(CCACHE_PROGRAM)
    set_target_properties(${name} PROPERTIES CXX_COMPILER_LAUNCHER
      "${CMAKE_COMMAND};-E;env;CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime;${CCACHE_PROGRAM}")
  endif()
  add_test(NAME ${name} COMMAND ${name})
endfunction()
