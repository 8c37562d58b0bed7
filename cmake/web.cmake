# The web dashboard (web/, docs/dashboard.md): at build time `npm ci` and
# `npm run build` (Vite) run in a copy of web/ inside the build directory,
# and cmake/embed_files.cmake turns the built files into a C++ source linked
# into drover. Nothing is written into the source tree, and nothing is read
# beside the binary at run time.
#
# Defines the library drover_dashboard_assets (DashboardFiles(), see
# src/server/dashboard_assets.h). With -DDROVER_WEB=OFF it is an empty table
# and the server answers / with a page saying the dashboard was not built.
option(DROVER_WEB "Build the web dashboard into drover (needs Node.js and npm)" ON)

set(DROVER_WEB_SOURCE ${PROJECT_SOURCE_DIR}/web)
set(DROVER_WEB_BINARY ${CMAKE_BINARY_DIR}/web)

if(NOT DROVER_WEB)
  message(STATUS "Web dashboard: off (-DDROVER_WEB=OFF)")
  add_library(drover_dashboard_assets STATIC ${PROJECT_SOURCE_DIR}/src/server/dashboard_assets_off.cc)
  target_include_directories(drover_dashboard_assets PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(drover_dashboard_assets PRIVATE ${DROVER_WARNINGS})
  return()
endif()

find_program(DROVER_NPM npm)
find_program(DROVER_NODE node)
if(NOT DROVER_NPM OR NOT DROVER_NODE)
  set(missing "")
  if(NOT DROVER_NODE)
    list(APPEND missing "node (Node.js)")
  endif()
  if(NOT DROVER_NPM)
    list(APPEND missing "npm")
  endif()
  list(JOIN missing " and " missing)
  message(FATAL_ERROR
    "The web dashboard needs Node.js and npm; not found on PATH: ${missing}. "
    "Run scripts/install-deps.sh (it installs Debian's nodejs and npm), "
    "or configure with -DDROVER_WEB=OFF to build drover without the dashboard.")
endif()
message(STATUS "Web dashboard: on (npm: ${DROVER_NPM})")

file(GLOB_RECURSE web_sources CONFIGURE_DEPENDS ${DROVER_WEB_SOURCE}/src/*)
set(web_config ${DROVER_WEB_SOURCE}/index.html ${DROVER_WEB_SOURCE}/vite.config.js)
set(web_lock ${DROVER_WEB_SOURCE}/package.json ${DROVER_WEB_SOURCE}/package-lock.json)

# npm ci: only when the package files change.
add_custom_command(
  OUTPUT ${DROVER_WEB_BINARY}/node_modules/.package-lock.json
  COMMAND ${CMAKE_COMMAND} -E make_directory ${DROVER_WEB_BINARY}
  COMMAND ${CMAKE_COMMAND} -E copy ${web_lock} ${DROVER_WEB_BINARY}/
  COMMAND ${DROVER_NPM} ci --no-audit --no-fund --loglevel=error
  WORKING_DIRECTORY ${DROVER_WEB_BINARY}
  DEPENDS ${web_lock}
  COMMENT "web: npm ci"
  VERBATIM)

# vite build: the sources are copied afresh (a deleted source file must not
# linger in the copy), built into web/dist.
add_custom_command(
  OUTPUT ${DROVER_WEB_BINARY}/dist/index.html
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${DROVER_WEB_BINARY}/src
  COMMAND ${CMAKE_COMMAND} -E copy_directory ${DROVER_WEB_SOURCE}/src ${DROVER_WEB_BINARY}/src
  COMMAND ${CMAKE_COMMAND} -E copy ${web_config} ${DROVER_WEB_BINARY}/
  COMMAND ${CMAKE_COMMAND} -E env DROVER_WEB_OUT=${DROVER_WEB_BINARY}/dist
          ${DROVER_NPM} run build --silent -- --logLevel warn
  WORKING_DIRECTORY ${DROVER_WEB_BINARY}
  DEPENDS ${web_sources} ${web_config} ${DROVER_WEB_BINARY}/node_modules/.package-lock.json
  COMMENT "web: vite build"
  VERBATIM)

set(assets_cc ${CMAKE_BINARY_DIR}/generated/dashboard_assets.cc)
add_custom_command(
  OUTPUT ${assets_cc}
  COMMAND ${CMAKE_COMMAND} -DDIR=${DROVER_WEB_BINARY}/dist -DOUT=${assets_cc}
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
  DEPENDS ${DROVER_WEB_BINARY}/dist/index.html ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
  COMMENT "web: embedding the dashboard"
  VERBATIM)

add_library(drover_dashboard_assets STATIC ${assets_cc})
target_include_directories(drover_dashboard_assets PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_compile_options(drover_dashboard_assets PRIVATE ${DROVER_WARNINGS})
