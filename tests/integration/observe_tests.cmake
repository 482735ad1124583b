# tiermemctl against live processes and memory servers (included from
# tests/integration/CMakeLists.txt; docs/observability.md).
tiermem_add_gtest(NAME observe_integration_test LABEL integration SOURCES memd_clients_test.cc)
target_link_libraries(observe_integration_test PRIVATE nlohmann_json::nlohmann_json tiermem_memd_child)  # MemdProcess
target_include_directories(observe_integration_test PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(observe_integration_test PRIVATE
  TIERMEM_MEMD_PATH="$<TARGET_FILE:tiermem-memd>" TIERMEM_CTL_PATH="$<TARGET_FILE:tiermemctl>")
add_dependencies(observe_integration_test tiermem-memd tiermemctl)
add_test(NAME observe.plot_draws_a_timeline_and_refuses_bad_files
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/plot_test.sh $<TARGET_FILE:tiermemctl>)
set_tests_properties(observe.plot_draws_a_timeline_and_refuses_bad_files PROPERTIES LABELS integration
                     TIMEOUT 120 SKIP_RETURN_CODE 77)
# A preloaded program watched from another process (label preload: LD_PRELOAD and a memd).
if(TARGET tiermem-preload)
  add_executable(observe_stats_target stats_target.c)
  set(_observe_args $<TARGET_FILE:tiermemctl> $<TARGET_FILE:tiermem-preload>
      $<TARGET_FILE:tiermem-memd> $<TARGET_FILE:observe_stats_target>)
  foreach(t stat metrics bad_input)
    add_test(NAME observe.${t} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/observe_${t}_test.sh ${_observe_args})
    set_tests_properties(observe.${t} PROPERTIES LABELS preload TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
endif()
# `tiermem run` (docs/run.md): exit status, signals, refused options, a memd of its own.
if(TARGET tiermem-preload)
  add_test(NAME run.exit_signals_options_local_memd
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/run_test.sh $<TARGET_FILE:tiermem-cli> $<TARGET_FILE:tiermem-hotset-prog>)
  set_tests_properties(run.exit_signals_options_local_memd PROPERTIES LABELS preload TIMEOUT 300)
endif()
# `tiermem advise` (docs/advise.md): the record, the model's shares, the check, refusals.
if(TARGET tiermem-preload)
  add_test(NAME advise.hotset_json_check_refusals
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/advise_test.sh $<TARGET_FILE:tiermem-cli> $<TARGET_FILE:tiermem-hotset-prog>)
  set_tests_properties(advise.hotset_json_check_refusals PROPERTIES LABELS preload TIMEOUT 300)
  # A program with a SIGSEGV handler of its own (as redis-server has): the lost reads said, uffd's record.
  add_executable(advise_own_segv_prog own_segv_prog.c)
  add_test(NAME advise.own_segv_handler
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/advise_segv_test.sh $<TARGET_FILE:tiermem-cli> $<TARGET_FILE:advise_own_segv_prog>)
  set_tests_properties(advise.own_segv_handler PROPERTIES LABELS preload TIMEOUT 300)
  # A program that aborts when a read(2) into its heap fails (as redis-server does): runs that end
  # otherwise than the plain run, the record made again with uffd.
  add_executable(advise_efault_prog efault_prog.c)
  set_target_properties(advise_efault_prog PROPERTIES OUTPUT_NAME efault_prog)
  add_test(NAME advise.run_ends_record_again
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/advise_exit_test.sh $<TARGET_FILE:tiermem-cli> $<TARGET_FILE:advise_efault_prog>)
  set_tests_properties(advise.run_ends_record_again PROPERTIES LABELS preload TIMEOUT 300)
endif()
