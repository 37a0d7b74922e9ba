#!/bin/sh
# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Doxygen INPUT_FILTER for tether's headers: their `//` comments are the
# documentation. Turns each run of `//` comment lines into `///` lines,
# except the copyright line, lines that only close a namespace or an #endif
# guard, and NOLINT or clang-format markers; code is left as it is.
case "$1" in
  *.md) exec cat "$1" ;;
esac
exec sed -E \
  -e '/^\/\/ Copyright /d' \
  -e '/(NOLINT|clang-format)/b' \
  -e 's@^([[:space:]]*)// ?(.*)$@\1/// \2@' \
  "$1"
