# Automatic tiering: the pure policy with a fake clock and synthetic traces; the tracker.
tiermem_add_gtest(NAME policy_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/policy_test.cc)
tiermem_add_gtest(NAME tracker_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tracker_test.cc)
tiermem_add_gtest(NAME policy_round_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/policy_round_test.cc)
tiermem_add_gtest(NAME tiering_config_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tiering_config_test.cc)
tiermem_add_gtest(NAME round_pacer_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/round_pacer_test.cc)
# The write trackers alone (include/tiermem/track.hpp): its own process, as protect's SIGSEGV
# sampler is process-wide.
tiermem_add_gtest(NAME write_tracker_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/write_tracker_test.cc)
tiermem_add_gtest(NAME scan_tracker_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/scan_tracker_test.cc)
# The policy thread's schedule on a ManualClock (base/clock.h), and the clocks themselves.
tiermem_add_gtest(NAME policy_loop_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/policy_loop_test.cc)
tiermem_add_gtest(NAME clock_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/clock_test.cc)
# The heat log (TIERMEM_HEAT_LOG) and `tiermem advise`'s reader and model of it.
tiermem_add_gtest(NAME heat_log_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/heat_log_test.cc ${PROJECT_SOURCE_DIR}/tools/tiermem/advise_model.cc)
# SIGSEGV's hand-over between the tracker's handler and the program's (base/os_signal.h): its own
# process, as the handler is process-wide.
tiermem_add_gtest(NAME segv_handover_unit_test LABEL unit SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/segv_handover_test.cc)
