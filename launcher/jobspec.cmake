# launcher/jobspec.cmake: the job spec parser (jobspec.c), the YAML binder it is built on
# (yaml_bind.c) and the hostfile reader (hostfile.c): the launcher's readers of outside bytes, as the
# static library ftl_jobspec.
# Included from launcher/CMakeLists.txt; kept in its own fragment so the parser, its unit tests
# and its fuzz target can be built without the rest of the launcher.
add_library(ftl_jobspec STATIC ${CMAKE_CURRENT_LIST_DIR}/jobspec.c ${CMAKE_CURRENT_LIST_DIR}/yaml_bind.c
                        ${CMAKE_CURRENT_LIST_DIR}/hostfile.c)
target_include_directories(ftl_jobspec PUBLIC ${PROJECT_SOURCE_DIR}/include)
if(XXHASH_INCLUDE_DIR)
  target_include_directories(ftl_jobspec PRIVATE ${XXHASH_INCLUDE_DIR})
endif()
if(NOT XXHASH_LIBRARY)
  message(FATAL_ERROR "ftl_jobspec needs libxxhash (Debian: libxxhash-dev)")
endif()
target_link_libraries(ftl_jobspec PUBLIC ftl_core PRIVATE ftl_internal PkgConfig::YAML ${XXHASH_LIBRARY})
target_compile_options(ftl_jobspec PRIVATE ${FTL_WARNINGS})
set_target_properties(ftl_jobspec PROPERTIES POSITION_INDEPENDENT_CODE ON)

# libFuzzer steers by coverage of the code under test, so the parser itself (not just the
# harness) must be instrumented in a fuzzing build. fuzzer-no-link adds the instrumentation
# without libFuzzer's main; the same flag at link time brings the runtime the instrumentation
# calls, so ordinary programs that link ftl_jobspec in such a build still link. Without
# FTL_SANITIZE the parser also gets ASan+UBSan here, or the fuzzer would only see the crashes
# that reach the harness.
if(FTL_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FTL_FUZZ=ON needs clang (-DCMAKE_C_COMPILER=clang)")
  endif()
  set(FTL_JOBSPEC_FUZZ_FLAGS -fsanitize=fuzzer-no-link)
  if(NOT FTL_SANITIZE)
    set(FTL_JOBSPEC_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined)
  endif()
  target_compile_options(ftl_jobspec PRIVATE ${FTL_JOBSPEC_FUZZ_FLAGS})
  target_link_options(ftl_jobspec INTERFACE ${FTL_JOBSPEC_FUZZ_FLAGS})
endif()
