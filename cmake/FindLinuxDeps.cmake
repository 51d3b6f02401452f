# Imported targets for the C libraries that ship pkg-config files or nothing:
#   castellan_dep::uring, castellan_dep::seccomp, castellan_dep::http_parser
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBURING REQUIRED IMPORTED_TARGET liburing>=2.3)
pkg_check_modules(LIBSECCOMP REQUIRED IMPORTED_TARGET libseccomp>=2.5)

find_path(HTTP_PARSER_INCLUDE_DIR NAMES http_parser.h)
find_library(HTTP_PARSER_LIBRARY NAMES http_parser)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(HttpParser REQUIRED_VARS HTTP_PARSER_INCLUDE_DIR HTTP_PARSER_LIBRARY)

find_path(ASIO_INCLUDE_DIR NAMES asio.hpp)
find_package_handle_standard_args(Asio REQUIRED_VARS ASIO_INCLUDE_DIR)

# A target with the property CASTELLAN_STATIC_LINK set (castellan-worker) is
# linked with -static and needs the archives instead of the shared objects
# pkg-config found; every other target links the shared ones.
find_library(LIBURING_ARCHIVE NAMES liburing.a HINTS ${LIBURING_LIBRARY_DIRS})
find_library(LIBSECCOMP_ARCHIVE NAMES libseccomp.a HINTS ${LIBSECCOMP_LIBRARY_DIRS})

if(NOT TARGET castellan_dep::uring)
  foreach(dep uring seccomp)
    string(TOUPPER ${dep} DEP)
    add_library(castellan_dep_${dep} INTERFACE IMPORTED)
    set_target_properties(castellan_dep_${dep} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${LIB${DEP}_INCLUDE_DIRS}"
      INTERFACE_LINK_LIBRARIES
        "$<IF:$<BOOL:$<TARGET_PROPERTY:CASTELLAN_STATIC_LINK>>,${LIB${DEP}_ARCHIVE},PkgConfig::LIB${DEP}>")
    add_library(castellan_dep::${dep} ALIAS castellan_dep_${dep})
  endforeach()
  add_library(castellan_dep_http_parser UNKNOWN IMPORTED)
  set_target_properties(castellan_dep_http_parser PROPERTIES
    IMPORTED_LOCATION "${HTTP_PARSER_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${HTTP_PARSER_INCLUDE_DIR}")
  add_library(castellan_dep::http_parser ALIAS castellan_dep_http_parser)
  add_library(castellan_dep_asio INTERFACE IMPORTED)
  set_target_properties(castellan_dep_asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${ASIO_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS ASIO_STANDALONE)
  add_library(castellan_dep::asio ALIAS castellan_dep_asio)
endif()
