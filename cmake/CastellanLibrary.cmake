# castellan_add_library(<name> SOURCES ... [PUBLIC_LIBS ...] [PRIVATE_LIBS ...])
#
# A static component library of castellan: our warnings, the project root as
# its public include directory (headers are included as "ipc/ring.hpp"), and an
# entry in the exported target set (installed as castellan::<name>).
function(castellan_add_library name)
  cmake_parse_arguments(L "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/castellan>)
  target_link_libraries(${name} PUBLIC ${L_PUBLIC_LIBS} PRIVATE ${L_PRIVATE_LIBS})
  castellan_target_warnings(${name})
  if(NOT CASTELLAN_FUZZ)
    install(TARGETS ${name} EXPORT castellanTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endfunction()

# Installs the headers of the current source directory under include/castellan/<rel>.
function(castellan_install_headers)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/castellan/${rel}
          FILES_MATCHING PATTERN "*.hpp")
endfunction()
