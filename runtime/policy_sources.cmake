# Automatic tiering (issue 6): policy, tracker, policy thread. Included from runtime/CMakeLists.txt.
target_sources(tiermem PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/policy.cc
  ${CMAKE_CURRENT_LIST_DIR}/tracker.cc
  ${CMAKE_CURRENT_LIST_DIR}/tracker_os.cc
  ${CMAKE_CURRENT_LIST_DIR}/migrator.cc
  ${CMAKE_CURRENT_LIST_DIR}/migrator_sample.cc)
