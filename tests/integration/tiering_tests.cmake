# Automatic tiering: policy thread + tracker + remote tier (memd on loopback).
tiermem_add_gtest(NAME tiering_integration_test LABEL integration TIMEOUT 300 SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tiering_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/own_dram_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/policy_cpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sampling_rounds_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/track_scan_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/heat_log_weights_test.cc)
target_compile_definitions(tiering_integration_test PRIVATE TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>")
add_dependencies(tiering_integration_test tiermem-memd)
target_link_libraries(tiering_integration_test PRIVATE tiermem_memd_child)  # MemdProcess (remote_memd_fixture.h)
# The soft sampler (runtime/paging/soft_sampler.h) driven directly: kinds of access, system
# calls on armed buffers, free/discard/move/fork with pages armed, threads under constant arming.
tiermem_add_gtest(NAME soft_sampler_test LABEL integration TIMEOUT 300 SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/soft_sampler_test.cc)
target_compile_definitions(soft_sampler_test PRIVATE TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>")
add_dependencies(soft_sampler_test tiermem-memd)
target_link_libraries(soft_sampler_test PRIVATE tiermem_memd_child)
