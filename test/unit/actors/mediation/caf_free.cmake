# Fails when a source or header of actors/mediation includes a CAF header,
# directly or through another header: castellan_mediation is CAF-free by
# design (docs/architecture.md). Run by CTest as
#   cmake -DCXX=<compiler> -DSOURCE_DIR=<project> -P caf_free.cmake
# The preprocessor lists every header a file reaches (-M); CAF's are under
# a caf/ directory. A file the preprocessor cannot read fails the check too.
file(GLOB files ${SOURCE_DIR}/actors/mediation/*.cpp ${SOURCE_DIR}/actors/mediation/*.hpp)
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no sources in ${SOURCE_DIR}/actors/mediation")
endif()
foreach(f IN LISTS files)
  execute_process(
    COMMAND ${CXX} -std=c++17 -x c++ -I${SOURCE_DIR} -M ${f}
    RESULT_VARIABLE rc OUTPUT_VARIABLE deps ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot list the headers of ${f}: ${err}")
  endif()
  if(deps MATCHES "/caf/")
    message(FATAL_ERROR "${f} reaches a CAF header; castellan_mediation must stay CAF-free")
  endif()
endforeach()
message(STATUS "${count} files of actors/mediation, none reaching CAF")
