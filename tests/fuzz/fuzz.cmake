# tests/fuzz/fuzz.cmake — sg_fuzz_target(): one libFuzzer target and its
# bounded CTest run. Included from the top CMakeLists before any module, so
# a module can keep its target beside its code (policy/fuzz.c) and the rest
# sit in tests/fuzz/. Only with clang (tests/run.sh makes build-fuzz for it).
#
#   sg_fuzz_target(<name> SOURCES f.c ... [LIBS lib ...] [CORPUS dir]
#                  [SEEDS dir ...] [FLAGS -max_len=N ...] [SECONDS n])
#
# builds <name> with -fsanitize=fuzzer,address,undefined (UBSan fatal) and
# registers the test <name>_smoke, label "fuzz": tests/fuzz/run.sh runs it on
# CORPUS (default tests/fuzz/corpus/<name>/, committed; every input in it runs
# first, so a crash input kept there is a regression test) plus the read-only
# SEEDS, for SECONDS (default 20; SANDGATE_FUZZ_SECONDS in the environment
# overrides every target's). A target whose coverage stops growing within a
# few seconds on its corpus gets fewer (measured: tests/fuzz/CMakeLists.txt). `cmake --build
# build-fuzz --target fuzzers` builds them all.
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set(SG_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
  # For libraries a target links: coverage and sanitizers, no main().
  set(SG_FUZZ_LIB_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                        -fno-omit-frame-pointer)
  add_custom_target(fuzzers)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
endif()

function(sg_fuzz_target name)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    return()
  endif()
  cmake_parse_arguments(F "" "CORPUS;SECONDS" "SOURCES;LIBS;SEEDS;FLAGS" ${ARGN})
  if(NOT F_SECONDS)
    set(F_SECONDS 20)
  endif()
  if(NOT F_CORPUS)
    set(F_CORPUS ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name})
  endif()
  add_executable(${name} ${F_SOURCES})
  target_compile_options(${name} PRIVATE ${SG_FUZZ_FLAGS})
  target_link_options(${name} PRIVATE ${SG_FUZZ_FLAGS})
  target_link_libraries(${name} PRIVATE ${F_LIBS})
  add_dependencies(fuzzers ${name})
  add_test(NAME ${name}_smoke
    COMMAND ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh $<TARGET_FILE:${name}> ${F_CORPUS} ${F_SEEDS}
            ${F_FLAGS}
    WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  # 20 s of fuzzing plus the corpus replay and ASan's exit; a run hung in
  # one input is a libFuzzer -timeout failure (10 s) well before this. COST:
  # the longest start first (ctest -j2 packs them onto the two cores).
  set_tests_properties(${name}_smoke PROPERTIES LABELS fuzz TIMEOUT 300 COST ${F_SECONDS}
                       ENVIRONMENT "SANDGATE_FUZZ_TARGET_SECONDS=${F_SECONDS}")
endfunction()
