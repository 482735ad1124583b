# Remote tier unit tests (included from tests/unit/CMakeLists.txt).
tiermem_add_gtest(NAME remote_unit_test LABEL unit SOURCES remote_protocol_test.cc)
# The pager's prefetcher (pure: synthetic fault streams).
tiermem_add_gtest(NAME prefetch_unit_test LABEL unit SOURCES prefetch_test.cc)
# The erasure code of TIERMEM_REMOTE_CODE (ISA-L, loaded at run time).
tiermem_add_gtest(NAME erasure_unit_test LABEL unit SOURCES erasure_test.cc)
# The write scan mode's eviction check (UFFDIO_MOVE and compare), alone and under a racing writer.
tiermem_add_gtest(NAME evict_check_unit_test LABEL unit SOURCES evict_check_test.cc)
