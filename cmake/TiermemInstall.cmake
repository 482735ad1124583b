# Install rules: headers, libraries, tools, a CMake package (find_package(tiermem)) and pkg-config.
include(CMakePackageConfigHelpers)
install(DIRECTORY include/tiermem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS tiermem EXPORT tiermemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tiermemTargets NAMESPACE tiermem:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tiermem COMPONENT dev)
configure_package_config_file(cmake/tiermemConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tiermemConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tiermem)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tiermemConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tiermemConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tiermemConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tiermem COMPONENT dev)
configure_file(cmake/tiermem.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tiermem.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tiermem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
