# Remote tier integration tests (included from tests/integration/CMakeLists.txt): they start
# tiermem-memd on loopback.
tiermem_add_gtest(NAME remote_integration_test LABEL integration TIMEOUT 600 SOURCES
  remote_transport_test.cc
  remote_part_test.cc
  remote_batch_test.cc
  remote_pager_test.cc
  remote_multi_test.cc
  remote_fault_conns_test.cc
  remote_replicas_test.cc
  remote_add_server_test.cc
  remote_code_test.cc
  remote_race_test.cc
  remote_track_scan_test.cc
  remote_writer_test.cc
  public_api_test.cc
  stats_block_test.cc)
target_compile_definitions(remote_integration_test PRIVATE TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>")
add_dependencies(remote_integration_test tiermem-memd)
target_link_libraries(remote_integration_test PRIVATE tiermem_memd_child)  # MemdProcess (remote_memd_fixture.h)
# A full memory server through the C++ API (TIERMEM_ON_REMOTE_FULL): its own small binary.
tiermem_add_gtest(NAME remote_full_test LABEL integration TIMEOUT 120 SOURCES remote_full_test.cc)
target_compile_definitions(remote_full_test PRIVATE TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>")
add_dependencies(remote_full_test tiermem-memd)
target_link_libraries(remote_full_test PRIVATE tiermem_memd_child)
# fork() with remote pages: the child served by the parent (TIERMEM_FORK=share), and fetch.
tiermem_add_gtest(NAME remote_fork_test LABEL integration TIMEOUT 300 SOURCES remote_fork_test.cc)
target_compile_definitions(remote_fork_test PRIVATE TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>")
add_dependencies(remote_fork_test tiermem-memd)
target_link_libraries(remote_fork_test PRIVATE tiermem_memd_child)
# DRAM counted as resident live pages: the heap's free pages under a limit, churn at 3x its live set.
tiermem_add_gtest(NAME resident_test LABEL integration TIMEOUT 120 SOURCES resident_test.cc)
target_compile_definitions(resident_test PRIVATE TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>")
add_dependencies(resident_test tiermem-memd)
target_link_libraries(resident_test PRIVATE tiermem_memd_child)
