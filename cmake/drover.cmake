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

# drover_test_code(TARGET)
# Options for code that only tests: GCC 12's -Warray-bounds,
# -Wstringop-overflow and -Wrestrict off (they fire on correct string
# concatenations and lists of strings there: GCC bugs 105329, 105651), and,
# in the default RelWithDebInfo build, -O1 with line tables only: GCC spends
# half of a test file's time optimizing and describing it (bench/README.md,
# "Build time"), and a failing test still shows its file and line. The
# libraries under test keep -O2 (with -g1, CMakeLists.txt). (A precompiled
# header for the test binaries was tried and measured a loss.)
function(drover_test_code target)
  target_compile_options(${target} PRIVATE ${DROVER_WARNINGS})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-array-bounds -Wno-stringop-overflow -Wno-restrict)
  endif()
  target_compile_options(${target} PRIVATE "$<$<CONFIG:RelWithDebInfo>:-O1;-g1>")
endfunction()

# drover_test(NAME SOURCES... [DEPS libs...])
# One GoogleTest binary per module, registered with ctest under NAME.
function(drover_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  drover_test_code(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  add_test(NAME ${name} COMMAND ${name})
endfunction()
