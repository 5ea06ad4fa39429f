# ctest includes this after the doctest cases of the four test binaries are registered
# (tests/CMakeLists.txt): COST for single cases. ctest starts the costliest tests first.
# The four-thread table stress test runs for TIDEMARK_TABLE_STRESS_SECONDS whatever else
# runs; with no cost of its own it started among the last and the suite ended waiting for
# it alone. Started beside the packaging consumer, it ends while the process tests run.
foreach(test IN LISTS runtime_tests_TESTS)
  if(test MATCHES "^runtime\\.tables under four threads")
    set_tests_properties("${test}" PROPERTIES COST 500)
  endif()
endforeach()
