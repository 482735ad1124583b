# tiermem_add_qemu_test: registers a ctest test that boots a QEMU guest topology and runs a command
# in it (qemu/run-guest.sh). Label `qemu`; tests of this label run one at a time (RESOURCE_LOCK
# qemu) after the fixture test qemu.prepare has fetched the guest kernel and built the initramfs
# base. Exit status 77 from the guest command is a skip.
#
#   tiermem_add_qemu_test(NAME <name> TOPOLOGY numa|cxl|rdma|full
#                         [TARGETS <cmake targets put into the guest>...]
#                         [FILES <other files put into the guest>...]
#                         [TIMEOUT <seconds, default 300>] [SMP <vCPUs, default 2>]
#                         [BOOT_TIMEOUT <seconds to reach /init, default 90>] [STALL_FIRST_BOOT]
#                         [KERNELS <guest kernels, default ${TIERMEM_QEMU_KERNELS}>...]
#                         [EXPECT_STATUS <n> [EXPECT_OUTPUT <string>] [EXPECT_STDERR <string>]]
#                         COMMAND <guest command...>)
#
# One test per guest kernel (qemu/fetch-kernel.sh: k61 is Debian 12's 6.1, k612 the 6.12 of
# bookworm-backports), called qemu.<topology>.<name>.<kernel>, so a failure names its topology and
# its kernel; each also has the label qemu-<kernel>. In cxl and full the CXL device is pmem on k61
# and volatile (ram) on k612 (run-guest.sh --cxl-mode). Targets and files
# land in the guest's /tiermem/bin (on PATH) with their shared libraries. EXPECT_STATUS n turns the
# test around: it passes only when the guest command exits with status n (and, with EXPECT_OUTPUT
# or EXPECT_STDERR, its stdout or stderr holds the string); for the harness's self-tests, as is
# STALL_FIRST_BOOT (run-guest.sh --stall-first-boot). A boot that does not reach /init within
# BOOT_TIMEOUT is started once more (run-guest.sh --boot-timeout).
# TARGETS are not built by ctest: build the project first, as usual.
set(TIERMEM_QEMU_DIR ${CMAKE_CURRENT_LIST_DIR})
set(TIERMEM_QEMU_KERNELS k61 k612 CACHE STRING "Guest kernels the QEMU tests boot (k61, k612)")
set(TIERMEM_QEMU_CACHE ${CMAKE_BINARY_DIR}/qemu-cache CACHE PATH
    "Where the QEMU tests cache the guest kernel package and initramfs parts")

function(tiermem_add_qemu_test)
  cmake_parse_arguments(Q "STALL_FIRST_BOOT" "NAME;TOPOLOGY;TIMEOUT;BOOT_TIMEOUT;SMP;EXPECT_STATUS;EXPECT_OUTPUT;EXPECT_STDERR"
                        "TARGETS;FILES;KERNELS;COMMAND" ${ARGN})
  if(NOT Q_NAME OR NOT Q_TOPOLOGY OR NOT Q_COMMAND)
    message(FATAL_ERROR "tiermem_add_qemu_test: NAME, TOPOLOGY and COMMAND are required")
  endif()
  if(NOT Q_TOPOLOGY MATCHES "^(numa|cxl|rdma|full)$")
    message(FATAL_ERROR "tiermem_add_qemu_test(${Q_NAME}): TOPOLOGY must be numa, cxl, rdma or full")
  endif()
  if(NOT Q_TIMEOUT)
    set(Q_TIMEOUT 300)
  endif()
  if(NOT Q_KERNELS)
    set(Q_KERNELS ${TIERMEM_QEMU_KERNELS})
  endif()
  set(args --cache ${TIERMEM_QEMU_CACHE} --topology ${Q_TOPOLOGY} --timeout ${Q_TIMEOUT})
  if(Q_SMP)
    list(APPEND args --smp ${Q_SMP})
  endif()
  if(Q_BOOT_TIMEOUT)
    list(APPEND args --boot-timeout ${Q_BOOT_TIMEOUT})
  endif()
  if(Q_STALL_FIRST_BOOT)
    list(APPEND args --stall-first-boot)
  endif()
  foreach(t IN LISTS Q_TARGETS)
    list(APPEND args --file $<TARGET_FILE:${t}>)
  endforeach()
  foreach(f IN LISTS Q_FILES)
    get_filename_component(f "${f}" ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND args --file ${f})
  endforeach()
  math(EXPR ctest_timeout "${Q_TIMEOUT} + 30")
  foreach(k IN LISTS Q_KERNELS)
    if(NOT k MATCHES "^(k61|k612)$")
      message(FATAL_ERROR "tiermem_add_qemu_test(${Q_NAME}): unknown guest kernel '${k}' (k61, k612)")
    endif()
    set(cmd ${TIERMEM_QEMU_DIR}/run-guest.sh --kernel ${k} ${args} -- ${Q_COMMAND})
    if(DEFINED Q_EXPECT_STATUS)
      set(expect ${Q_EXPECT_STATUS})
      if(DEFINED Q_EXPECT_OUTPUT)
        list(APPEND expect --stdout-has ${Q_EXPECT_OUTPUT})
      endif()
      if(DEFINED Q_EXPECT_STDERR)
        list(APPEND expect --stderr-has ${Q_EXPECT_STDERR})
      endif()
      set(cmd ${TIERMEM_QEMU_DIR}/expect-status.sh ${expect} ${cmd})
    endif()
    set(name qemu.${Q_TOPOLOGY}.${Q_NAME}.${k})
    add_test(NAME ${name} COMMAND ${cmd})
    set_tests_properties(${name} PROPERTIES
      LABELS "qemu;qemu-${k}" RESOURCE_LOCK qemu FIXTURES_REQUIRED tiermem_qemu
      SKIP_RETURN_CODE 77 TIMEOUT ${ctest_timeout})
  endforeach()
endfunction()
