# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Builds and runs test/consumer against tether. Run by ctest (label
# `consumer`) as
#
#   cmake -DMODE=find_package|shared|add_subdirectory -DTETHER_SOURCE_DIR=...
#         -DTETHER_BINARY_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=...
#         [-DPREFIX=...] [-DGENERATOR=...] [-DCXX_COMPILER=...]
#         [-DCXX_COMPILER_LAUNCHER=...] [-DBUILD_TYPE=...] [-DCONFIG=...]
#         [-DBUILD_TYPE_CXX_FLAGS=...] [-DWITH_PROMETHEUS=1|0]
#         -P run_consumer.cmake
#
# find_package:     `cmake --install` the tether build into PREFIX, then
#                   configure the consumer with CMAKE_PREFIX_PATH=PREFIX, build
#                   and run it; then check tether.pc by compiling and linking
#                   a program with `pkg-config --cflags --libs tether`.
# shared:           configure and build tether itself with
#                   BUILD_SHARED_LIBS=ON (library only) in WORK_DIR, install it
#                   into PREFIX, check its SONAME and that it exports only
#                   namespace tether, then as find_package (the consumer's
#                   executables must need libtether.so).
# add_subdirectory: configure the consumer with tether's source tree embedded.
#
# Every mode builds and runs `consumer`, `consumer_plugin_host` (tether in
# a shared object) and `consumer_drain` (tether::server), and fails if configuring the consumer prints
# "Could NOT find" (a dependency search that is not quiet).
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

# Like run(), and sets `out` in the caller to what the command printed.
function(run_capture out)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "run_consumer: ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o
                  ERROR_VARIABLE o)
  message("${o}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run_consumer: command failed (${rc}): ${pretty}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()

set(build_dir "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# The toolchain given, for every project configured here.
set(toolchain_args)
if(GENERATOR)
  list(APPEND toolchain_args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND toolchain_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CXX_COMPILER_LAUNCHER)
  list(APPEND toolchain_args
       "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER}")
endif()
if(BUILD_TYPE)
  list(APPEND toolchain_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
  # The outer build's flags for that type (scripts/test: -g1 line tables,
  # which compile in about 60 % of the time of -g's full debug info).
  if(DEFINED BUILD_TYPE_CXX_FLAGS)
    string(TOUPPER "${BUILD_TYPE}" build_type_upper)
    list(APPEND toolchain_args
         "-DCMAKE_CXX_FLAGS_${build_type_upper}=${BUILD_TYPE_CXX_FLAGS}")
  endif()
endif()

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build_dir}"
  "-DTETHER_CONSUMER_MODE=${MODE}" ${toolchain_args})
# Whether tether was built with tether::prometheus: the consumer then
# requires the component and uses it.
if(WITH_PROMETHEUS)
  list(APPEND configure_args -DTETHER_CONSUMER_PROMETHEUS=ON)
endif()
set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

if(MODE STREQUAL "shared")
  # tether itself, as a shared library, built the way the README's "build
  # and install the library only" does.
  set(shared_build "${WORK_DIR}/tether-shared")
  set(shared_args -S "${TETHER_SOURCE_DIR}" -B "${shared_build}"
      -DBUILD_SHARED_LIBS=ON -DTETHER_BUILD_TESTS=OFF
      -DTETHER_BUILD_EXAMPLES=OFF -DTETHER_BUILD_BENCH=OFF
      -DTETHER_INSTALL=ON ${toolchain_args})
  run("${CMAKE_COMMAND}" ${shared_args})
  run("${CMAKE_COMMAND}" --build "${shared_build}" --parallel ${jobs}
      ${config_args})
  set(TETHER_BINARY_DIR "${shared_build}")
endif()

if(MODE STREQUAL "find_package" OR MODE STREQUAL "shared")
  if(NOT PREFIX)
    message(FATAL_ERROR "run_consumer.cmake: -DPREFIX=... is required")
  endif()
  file(REMOVE_RECURSE "${PREFIX}")
  run("${CMAKE_COMMAND}" --install "${TETHER_BINARY_DIR}" --prefix "${PREFIX}"
      ${config_args})
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${PREFIX}"
       # Only the freshly installed tether, never one from the system.
       -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
       "-DCMAKE_INSTALL_PREFIX=${WORK_DIR}/consumer-prefix")
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args "-DTETHER_SOURCE_DIR=${TETHER_SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

if(MODE STREQUAL "shared")
  # The consumer project itself is a find_package consumer.
  list(TRANSFORM configure_args REPLACE "^-DTETHER_CONSUMER_MODE=shared$"
       "-DTETHER_CONSUMER_MODE=find_package")
endif()
run_capture(configure_out "${CMAKE_COMMAND}" ${configure_args})
if(configure_out MATCHES "Could NOT find")
  message(FATAL_ERROR "run_consumer: configuring the consumer printed "
                      "\"Could NOT find\": a dependency search is not quiet")
endif()
run("${CMAKE_COMMAND}" --build "${build_dir}" --target consumer
    consumer_plugin_host consumer_drain --parallel ${jobs} ${config_args})

if(EXISTS "${build_dir}/consumer")
  set(consumer_exe "${build_dir}/consumer")
elseif(CONFIG AND EXISTS "${build_dir}/${CONFIG}/consumer")
  set(consumer_exe "${build_dir}/${CONFIG}/consumer")
else()
  message(FATAL_ERROR "run_consumer: consumer executable not found")
endif()
run("${consumer_exe}")
get_filename_component(consumer_exe_dir "${consumer_exe}" DIRECTORY)
run("${consumer_exe_dir}/consumer_plugin_host")
run("${consumer_exe_dir}/consumer_drain")

if(MODE STREQUAL "add_subdirectory")
  return()
endif()

# The generated-code target installs with its headers, and the exported
# target finds them under the install prefix.
run("${CMAKE_COMMAND}" --install "${build_dir}" ${config_args})
file(GLOB_RECURSE installed_pb_h "${WORK_DIR}/consumer-prefix/*/consumer.pb.h")
file(GLOB_RECURSE installed_targets
     "${WORK_DIR}/consumer-prefix/*/consumerTargets.cmake")
if(NOT installed_pb_h OR NOT installed_targets)
  message(FATAL_ERROR "run_consumer: tether_install_proto did not install "
                      "consumer.pb.h and the export of consumer_proto")
endif()
file(READ "${installed_targets}" targets_text)
string(FIND "${targets_text}"
       "INTERFACE_INCLUDE_DIRECTORIES \"\${_IMPORT_PREFIX}/include\"" at)
if(at EQUAL -1)
  message(FATAL_ERROR "run_consumer: the exported consumer_proto does not "
                      "name the installed include directory")
endif()

if(MODE STREQUAL "shared")
  file(GLOB libtether "${PREFIX}/*/libtether.so.*.*.*")
  find_program(READELF readelf)
  find_program(NM nm)
  if(NOT libtether OR NOT READELF OR NOT NM)
    message(FATAL_ERROR "run_consumer: no libtether.so.X.Y.Z installed, or "
                        "no readelf/nm")
  endif()
  execute_process(COMMAND "${READELF}" -d "${libtether}"
                  OUTPUT_VARIABLE dynamic)
  if(NOT dynamic MATCHES "SONAME\\)[^\n]*\\[libtether\\.so\\.[0-9]+\\]")
    message(FATAL_ERROR "run_consumer: libtether has no versioned SONAME:\n"
                        "${dynamic}")
  endif()
  execute_process(COMMAND "${READELF}" -d "${consumer_exe}"
                  OUTPUT_VARIABLE exe_dynamic)
  if(NOT exe_dynamic MATCHES "NEEDED\\)[^\n]*\\[libtether\\.so\\.[0-9]+\\]")
    message(FATAL_ERROR "run_consumer: consumer does not need libtether.so")
  endif()
  # Exported: namespace tether only (not abseil's, gRPC's or the standard
  # library's inline code, nor the private health-check messages), judged
  # by mangled name: "_ZN6tether...", "_ZTVN6tether...", thunks, guards.
  # And of tether::internal only what the public headers declare (a class,
  # function, alias, enum or namespace: the templates and inline functions
  # users compile call into it), nothing declared under src/.
  file(GLOB_RECURSE public_headers "${TETHER_SOURCE_DIR}/include/*.h")
  set(public_text "")
  foreach(header IN LISTS public_headers)
    file(READ "${header}" text)
    string(APPEND public_text "${text}")
  endforeach()
  execute_process(COMMAND "${NM}" -D --defined-only "${libtether}"
                  OUTPUT_VARIABLE exported)
  string(REPLACE "\n" ";" exported "${exported}")
  set(head "^_Z(Z?N[KRO]*|T[VISTHW]N|GVZ?N[KRO]*|T[hv][0-9n_]+N[KRO]*)")
  set(foreign 0)
  set(tether_symbols 0)
  set(private_names "")
  foreach(line IN LISTS exported)
    if(NOT line MATCHES "^[0-9a-f]+ [A-Za-z] (.*)$")
      continue()
    endif()
    set(name "${CMAKE_MATCH_1}")
    if(name MATCHES "${head}6tether8internal6health")
      math(EXPR foreign "${foreign} + 1")
      message(STATUS "run_consumer: libtether exports ${name}")
    elseif(name MATCHES "${head}6tether")
      math(EXPR tether_symbols "${tether_symbols} + 1")
      if(name MATCHES "${head}6tether8internal([0-9]+)(.*)$")
        string(SUBSTRING "${CMAKE_MATCH_3}" 0 ${CMAKE_MATCH_2} part)
        if(NOT public_text MATCHES "(class|struct|using|enum class|namespace) ${part}[^;A-Za-z0-9_]"
           AND NOT public_text MATCHES "[ *&]${part}\\(")
          list(APPEND private_names "${part}")
        endif()
      endif()
    elseif(NOT name MATCHES "^_init$|^_fini$")
      math(EXPR foreign "${foreign} + 1")
      if(foreign LESS 10)
        message(STATUS "run_consumer: libtether exports ${line}")
      endif()
    endif()
  endforeach()
  if(foreign GREATER 0 OR tether_symbols EQUAL 0)
    message(FATAL_ERROR "run_consumer: libtether exports ${foreign} symbols "
                        "outside namespace tether (${tether_symbols} inside)")
  endif()
  if(private_names)
    list(REMOVE_DUPLICATES private_names)
    message(FATAL_ERROR "run_consumer: libtether exports tether::internal "
                        "parts that no public header declares: ${private_names}")
  endif()
  message(STATUS "run_consumer: libtether exports ${tether_symbols} symbols, "
                 "all in namespace tether")
endif()

if(NOT MODE STREQUAL "find_package")
  message(STATUS "run_consumer: ${MODE}: PASS")
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
