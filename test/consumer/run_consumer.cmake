# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Builds and runs test/consumer against tether. Run by ctest (label
# `consumer`) as
#
#   cmake -DMODE=find_package|add_subdirectory -DTETHER_SOURCE_DIR=...
#         -DTETHER_BINARY_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=...
#         [-DPREFIX=...] [-DGENERATOR=...] [-DCXX_COMPILER=...]
#         [-DCXX_COMPILER_LAUNCHER=...] [-DBUILD_TYPE=...] [-DCONFIG=...]
#         [-DWITH_PROMETHEUS=1|0]
#         -P run_consumer.cmake
#
# find_package:     `cmake --install` the tether build into PREFIX, then
#                   configure the consumer with CMAKE_PREFIX_PATH=PREFIX, build
#                   and run it; then check tether.pc by compiling and linking
#                   a program with `pkg-config --cflags --libs tether`.
# add_subdirectory: configure the consumer with tether's source tree embedded.
#
# The environment variable TETHER_CONSUMER_JOBS sets the build parallelism
# (default 1).

cmake_minimum_required(VERSION 3.16)

foreach(var MODE TETHER_SOURCE_DIR TETHER_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${var}=... is required")
  endif()
endforeach()

set(jobs 1)
if(DEFINED ENV{TETHER_CONSUMER_JOBS})
  set(jobs "$ENV{TETHER_CONSUMER_JOBS}")
endif()

function(run)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "run_consumer: ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run_consumer: command failed (${rc}): ${pretty}")
  endif()
endfunction()

set(build_dir "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build_dir}"
  "-DTETHER_CONSUMER_MODE=${MODE}")
# Whether tether was built with tether::prometheus: the consumer then
# requires the component and uses it.
if(WITH_PROMETHEUS)
  list(APPEND configure_args -DTETHER_CONSUMER_PROMETHEUS=ON)
endif()
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args
       "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER}")
endif()
if(BUILD_TYPE)
  list(APPEND configure_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

if(MODE STREQUAL "find_package")
  if(NOT PREFIX)
    message(FATAL_ERROR "run_consumer.cmake: -DPREFIX=... is required")
  endif()
  file(REMOVE_RECURSE "${PREFIX}")
  run("${CMAKE_COMMAND}" --install "${TETHER_BINARY_DIR}" --prefix "${PREFIX}"
      ${config_args})
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${PREFIX}"
       # Only the freshly installed tether, never one from the system.
       -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args "-DTETHER_SOURCE_DIR=${TETHER_SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

run("${CMAKE_COMMAND}" ${configure_args})
run("${CMAKE_COMMAND}" --build "${build_dir}" --target consumer
    --parallel ${jobs} ${config_args})

if(EXISTS "${build_dir}/consumer")
  set(consumer_exe "${build_dir}/consumer")
elseif(CONFIG AND EXISTS "${build_dir}/${CONFIG}/consumer")
  set(consumer_exe "${build_dir}/${CONFIG}/consumer")
else()
  message(FATAL_ERROR "run_consumer: consumer executable not found")
endif()
run("${consumer_exe}")

if(NOT MODE STREQUAL "find_package")
  return()
endif()

# Verify the installed Config files name the tether we installed.
file(GLOB_RECURSE config_file "${PREFIX}/*/tetherConfig.cmake")
file(GLOB_RECURSE pc_file "${PREFIX}/*/pkgconfig/tether.pc")
if(NOT config_file OR NOT pc_file)
  message(FATAL_ERROR "run_consumer: tetherConfig.cmake or tether.pc missing "
                      "under ${PREFIX}")
endif()

# pkg-config: compile and link a small program with the flags tether.pc gives.
find_program(PKG_CONFIG_EXECUTABLE pkg-config)
if(NOT PKG_CONFIG_EXECUTABLE OR NOT CXX_COMPILER)
  message(STATUS "run_consumer: no pkg-config or compiler; tether.pc not checked")
  return()
endif()
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
if(DEFINED ENV{PKG_CONFIG_PATH} AND NOT "$ENV{PKG_CONFIG_PATH}" STREQUAL "")
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}:$ENV{PKG_CONFIG_PATH}")
else()
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
endif()
execute_process(
  COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags --libs tether
  RESULT_VARIABLE rc OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run_consumer: pkg-config tether failed: ${pc_err}")
endif()
message(STATUS "run_consumer: pkg-config --cflags --libs tether: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
file(WRITE "${WORK_DIR}/pc_main.cc" [=[
#include "tether/clock.h"
#include "tether/testing/fake_clock.h"
#include "tether/version.h"
static_assert(TETHER_VERSION_MAJOR >= 0, "tether/version.h");
int main() {
  tether::fakes::FakeClock clock;
  bool fired = false;
  clock.RunAfter(absl::Seconds(1), [&] { fired = true; });
  clock.AdvanceBy(absl::Seconds(1));
  absl::Time t = tether::SystemClock().Now();
  return fired && t > absl::UnixEpoch() ? 0 : 1;
}
]=])
run("${CXX_COMPILER}" -std=c++17 "${WORK_DIR}/pc_main.cc" -o
    "${WORK_DIR}/pc_main" ${pc_flags})
run("${WORK_DIR}/pc_main")
message(STATUS "run_consumer: ${MODE}: PASS")
