# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# libFuzzer builds for tether.
#
#   TETHER_BUILD_FUZZERS=ON   build test/fuzz/<name> as libFuzzer binaries
#                             (clang only; default OFF)
#
# Everything in the build (library, fuzzers, the tests around them) is then
# compiled with coverage instrumentation for the fuzzer and ASan+UBSan
# (-fsanitize=fuzzer-no-link,address,undefined), so that the code in
# libtether (pool core, breaker) guides the fuzzers too; only the fuzzer
# executables link libFuzzer's main (-fsanitize=fuzzer, test/fuzz/). Use a
# build directory of its own (scripts/test --fuzz uses build-fuzz/). Like
# TETHER_SANITIZE, the flags never reach the exported targets.

include_guard(GLOBAL)

option(TETHER_BUILD_FUZZERS
       "Build libFuzzer binaries of test/fuzz (clang only)" OFF)

if(NOT TETHER_BUILD_FUZZERS)
  return()
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR
    "TETHER_BUILD_FUZZERS needs clang (libFuzzer), not "
    "${CMAKE_CXX_COMPILER_ID}; e.g. CXX=clang++-14")
endif()
if(NOT TETHER_SANITIZE STREQUAL "")
  message(FATAL_ERROR
    "TETHER_BUILD_FUZZERS brings its own sanitizers (address,undefined); "
    "leave TETHER_SANITIZE empty")
endif()

set(_tether_fuzz_flags
  -fsanitize=fuzzer-no-link,address,undefined
  -fno-sanitize-recover=undefined
  -fno-omit-frame-pointer)
add_compile_options(${_tether_fuzz_flags})
add_link_options(-fsanitize=address,undefined)
message(STATUS "tether: fuzzer build, flags: ${_tether_fuzz_flags}")
unset(_tether_fuzz_flags)
