# castellan_add_test_executable(NAME <exe> SOURCES ... LIBRARIES ... SUITES ...
#                               [TIMEOUT seconds] [LABELS ...])
#
# One Boost.Test executable per module, one CTest entry per suite, each with a
# timeout. Suites are listed explicitly so that a suite that silently vanishes
# from the binary fails its CTest entry ("no matching test") instead of passing.
function(castellan_add_test_executable)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBRARIES;SUITES;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBRARIES} Boost::unit_test_framework)
  target_compile_definitions(${T_NAME} PRIVATE BOOST_TEST_DYN_LINK)
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/test)
  castellan_target_warnings(${T_NAME})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/test-bin)
  foreach(suite IN LISTS T_SUITES)
    add_test(NAME ${T_NAME}.${suite}
             COMMAND ${T_NAME} --run_test=${suite} --report_level=short --log_level=message)
    set_tests_properties(${T_NAME}.${suite} PROPERTIES TIMEOUT ${T_TIMEOUT}
      ENVIRONMENT "CASTELLAN_BUILD_DIR=${PROJECT_BINARY_DIR};CASTELLAN_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
      SKIP_RETURN_CODE 77)
    if(T_LABELS)
      set_tests_properties(${T_NAME}.${suite} PROPERTIES LABELS "${T_LABELS}")
    endif()
  endforeach()
endfunction()
