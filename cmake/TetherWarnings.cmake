# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# tether_target_warnings(<target>)
#
# Adds tether's warning flags to <target> as PRIVATE options, plus -Werror
# when TETHER_WERROR is ON. Call it for every target built from tether's own
# sources (library, tests, examples, benchmarks), never for generated
# protobuf/gRPC code: that code is not ours and is exempt from warnings.
# With TETHER_THREAD_SAFETY=ON and clang, also clang's thread-safety
# analysis as errors (-Wthread-safety -Werror=thread-safety), whatever
# TETHER_WERROR says.
# Not installed: this is for tether's own build only.

include_guard(GLOBAL)

option(TETHER_THREAD_SAFETY
       "clang only: -Wthread-safety -Werror=thread-safety on tether's code" OFF)

function(tether_target_warnings target)
  if(MSVC)
    set(_flags /W4)
    if(TETHER_WERROR)
      list(APPEND _flags /WX)
    endif()
  else()
    set(_flags
      -Wall
      -Wextra
      -Wpedantic
      -Wnon-virtual-dtor
      -Woverloaded-virtual
      -Wimplicit-fallthrough
      -Wcast-qual
      -Wformat=2)
    if(TETHER_WERROR)
      list(APPEND _flags -Werror)
    endif()
    if(TETHER_THREAD_SAFETY AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      list(APPEND _flags -Wthread-safety -Werror=thread-safety)
    endif()
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    message(FATAL_ERROR "tether_target_warnings: ${target} is an INTERFACE "
                        "library; warnings are PRIVATE and need sources")
  endif()
  target_compile_options(${target} PRIVATE ${_flags})
endfunction()
