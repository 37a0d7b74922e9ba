# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Sanitizer builds for tether.
#
#   TETHER_SANITIZE=""         no sanitizer (default)
#   TETHER_SANITIZE="address"  AddressSanitizer + UndefinedBehaviorSanitizer
#   TETHER_SANITIZE="thread"   ThreadSanitizer
#
# The flags are added with add_compile_options()/add_link_options() in the
# directory that includes this file, so they apply to every target defined
# there and below: the library, tests, examples, benchmarks and generated
# protobuf code. They are never put on the exported targets' usage
# requirements: an installed tether does not force sanitizers on its users.
#
# gRPC, protobuf and abseil come prebuilt from the system and are not
# instrumented. ASan/UBSan cope with that; TSan may then report races inside
# gRPC internals it cannot see the synchronization of. test/tsan.supp holds
# suppressions scoped to those libraries (see scripts/test).

include_guard(GLOBAL)

set(TETHER_SANITIZE "" CACHE STRING
    "Sanitizer to build with: empty, 'address' (ASan+UBSan) or 'thread'")
set_property(CACHE TETHER_SANITIZE PROPERTY STRINGS "" "address" "thread")

if(TETHER_SANITIZE STREQUAL "")
  return()
endif()

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  message(FATAL_ERROR
    "TETHER_SANITIZE is supported with GCC and Clang only, not "
    "${CMAKE_CXX_COMPILER_ID}")
endif()

if(TETHER_SANITIZE STREQUAL "address")
  set(_tether_sanitize_flags
    -fsanitize=address,undefined
    # Make every UBSan finding fatal, whatever UBSAN_OPTIONS says.
    -fno-sanitize-recover=undefined)
elseif(TETHER_SANITIZE STREQUAL "thread")
  set(_tether_sanitize_flags -fsanitize=thread)
else()
  message(FATAL_ERROR
    "TETHER_SANITIZE='${TETHER_SANITIZE}' is not valid; use '', 'address' "
    "or 'thread'")
endif()

# Readable stacks in reports.
list(APPEND _tether_sanitize_flags -fno-omit-frame-pointer)

add_compile_options(${_tether_sanitize_flags})
add_link_options(${_tether_sanitize_flags})
message(STATUS "tether: building with sanitizer flags: ${_tether_sanitize_flags}")
unset(_tether_sanitize_flags)
