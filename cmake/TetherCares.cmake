# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Finds c-ares (target c-ares::cares) quietly, before gRPC's package config
# looks for it. gRPC's config asks for c-ares through its own module, which
# first tries a c-ares CMake config package that Debian does not ship: that
# prints "Could NOT find c-ares (missing: c-ares_DIR)" into every project
# that finds gRPC (tether's users included), then finds the library by hand.
# With c-ares_FOUND set here gRPC's config skips the search. Included by
# tether's CMakeLists.txt and by the installed tetherConfig.cmake; a project
# that already found c-ares keeps its own. When c-ares is not installed,
# nothing is set and gRPC's config reports it as before.
include_guard(GLOBAL)

if(NOT c-ares_FOUND)
  find_package(c-ares CONFIG QUIET)
endif()
if(NOT c-ares_FOUND)
  find_path(TETHER_CARES_INCLUDE_DIR NAMES ares.h)
  find_library(TETHER_CARES_LIBRARY NAMES cares)
  mark_as_advanced(TETHER_CARES_INCLUDE_DIR TETHER_CARES_LIBRARY)
  if(TETHER_CARES_INCLUDE_DIR AND TETHER_CARES_LIBRARY)
    if(NOT TARGET c-ares::cares)
      # Visible to the whole project when tether is embedded (the targets
      # that gRPC's name must be).
      set(_tether_cares_scope)
      if(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL OR NOT CMAKE_SOURCE_DIR STREQUAL
                                              CMAKE_CURRENT_SOURCE_DIR)
        set(_tether_cares_scope GLOBAL)
      endif()
      add_library(c-ares::cares UNKNOWN IMPORTED ${_tether_cares_scope})
      set_target_properties(c-ares::cares PROPERTIES
        IMPORTED_LOCATION "${TETHER_CARES_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${TETHER_CARES_INCLUDE_DIR}")
      unset(_tether_cares_scope)
    endif()
    set(c-ares_FOUND TRUE)
  endif()
endif()
