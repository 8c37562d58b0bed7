# The worker's resource detection: cores, memory, cgroup limits, GPUs
# (NVML via dlopen, nvidia-smi fallback, manual flags), labels, counters and
# heartbeat utilization. See resources.h.
drover_library(drover_worker_resources
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/resources.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_cgroup.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_host.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_labels.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_usage.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_detect.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_lock.cc
    ${CMAKE_CURRENT_LIST_DIR}/nvml.cc
    ${CMAKE_CURRENT_LIST_DIR}/nvidia_smi.cc
  DEPS drover_common ${CMAKE_DL_LIBS})
# NvmlGpuSource::Api names the C types of nvml.cc's anonymous namespace.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/nvml.cc
  PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)

# Fake NVML libraries for the tests: a working one named like the real
# library, and one lacking a symbol. They live in their own directories so
# LD_LIBRARY_PATH can pick one.
set(fake_nvml_src ${PROJECT_SOURCE_DIR}/tests/fake_nvml/fake_nvml.c)
set(fake_nvml_dir ${CMAKE_BINARY_DIR}/tests/fake_nvml)
foreach(variant good nosym)
  add_library(fake_nvml_${variant} SHARED ${fake_nvml_src})
  target_compile_options(fake_nvml_${variant} PRIVATE ${DROVER_WARNINGS})
  set_target_properties(fake_nvml_${variant} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "nvidia-ml" SUFFIX ".so.1" NO_SONAME ON
    LIBRARY_OUTPUT_DIRECTORY ${fake_nvml_dir}/${variant})
endforeach()
target_compile_definitions(fake_nvml_nosym PRIVATE FAKE_NVML_OMIT_UTILIZATION)

drover_test(worker_resources_test
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/resources_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_cgroup_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_host_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_labels_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/resources_usage_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_lock_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/nvml_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/nvidia_smi_test.cc
  DEPS drover_worker_resources)
add_dependencies(worker_resources_test fake_nvml_good fake_nvml_nosym)
target_compile_definitions(worker_resources_test PRIVATE
  FAKE_NVML_GOOD="${fake_nvml_dir}/good/libnvidia-ml.so.1"
  FAKE_NVML_NOSYM="${fake_nvml_dir}/nosym/libnvidia-ml.so.1")
