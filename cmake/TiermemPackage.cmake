# Debian packages: `cpack -G DEB` in the build folder makes
#   tiermem      the libraries, the preload library, the programs (tiermem, tiermemctl,
#                tiermem-memd, tiermem-bench), their man pages and tiermem-memd's systemd unit
#                with its settings in /etc/tiermem (packaging/);
#   tiermem-dev  the headers, the CMake package and the pkg-config file.
# Install rules name their component "dev"; every other one is "runtime" (the default, set in
# the top CMakeLists.txt). Tested by tests/package (ctest label package).
set(_pkg ${PROJECT_SOURCE_DIR}/packaging)
install(FILES ${_pkg}/tiermem-memd.service DESTINATION lib/systemd/system COMPONENT runtime)
install(FILES ${_pkg}/memd.conf DESTINATION /etc/tiermem COMPONENT runtime)

# Man pages, made from each program's --help by help2man (Debian's help2man package).
find_program(TIERMEM_HELP2MAN help2man)
if(TIERMEM_HELP2MAN)
  set(_man_pages "")
  foreach(entry "tiermem-cli|tiermem|run unmodified programs with tiered memory|run"
                "tiermemctl|tiermemctl|inspect tiermem's memory tiers, processes and memory servers|topology;options;tiers;ps;stat;top;serve-metrics;memd;plot"
                "tiermem-memd|tiermem-memd|tiermem's memory server (the remote tier)|")
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 target)
    list(GET parts 1 name)
    list(GET parts 2 what)
    list(SUBLIST parts 3 -1 subcommands)
    set(_out ${CMAKE_CURRENT_BINARY_DIR}/man/${name}.1.gz)
    add_custom_command(OUTPUT ${_out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/man
      COMMAND ${PROJECT_SOURCE_DIR}/scripts/man-page.sh ${TIERMEM_HELP2MAN} $<TARGET_FILE:${target}>
              ${name} ${what} ${PROJECT_VERSION} ${_out} ${subcommands}
      DEPENDS ${target} ${PROJECT_SOURCE_DIR}/scripts/man-page.sh VERBATIM)
    list(APPEND _man_pages ${_out})
  endforeach()
  add_custom_target(tiermem-man ALL DEPENDS ${_man_pages})
  install(FILES ${_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
else()
  message(STATUS "help2man not found: no man pages (scripts/install-deps.sh installs it)")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tiermem)
set(CPACK_PACKAGE_VENDOR tiermem)
set(CPACK_PACKAGE_CONTACT "tiermem maintainers <tiermem@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tiered and disaggregated memory: DRAM, CXL and memory servers")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME tiermem)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME tiermem-dev)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "tiermem (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${_pkg}/postinst ${_pkg}/postrm ${_pkg}/conffiles)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "tiermem keeps a program's hot pages in DRAM, warm ones on CXL memory and cold ones on memory servers")
set(CPACK_COMPONENT_DEV_DESCRIPTION "headers, CMake package and pkg-config file for building against tiermem")
include(CPack)
