# The tiered heap's unit tests; included from tests/unit/CMakeLists.txt.
tiermem_add_gtest(NAME heap_unit_test LABEL unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/heap_test.cc)
tiermem_add_gtest(NAME heap_stress_test LABEL unit TIMEOUT 900
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/heap_stress_test.cc)
tiermem_add_gtest(NAME heap_run_cache_test LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/heap_run_cache_test.cc)
tiermem_add_gtest(NAME heap_primary_test LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/heap_primary_test.cc)
tiermem_add_gtest(NAME heap_owner_test LABEL unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/heap_owner_test.cc)
