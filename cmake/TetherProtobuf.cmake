# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# tether_generate_proto(): compile .proto files into a static C++ library.
#
#   tether_generate_proto(
#     TARGET <name>                 # static library to create (required)
#     PROTOS <file.proto>...        # .proto files (required; relative paths
#                                   # are taken from CMAKE_CURRENT_SOURCE_DIR)
#     [GRPC]                        # also run grpc_cpp_plugin (.grpc.pb.*)
#     [MOCKS]                       # also emit <name>_mock.grpc.pb.h
#                                   # (implies GRPC; links GTest::gmock)
#     [IMPORT_DIRS <dir>...]        # proto roots; default: the directory of
#                                   # each proto file
#     [OUT_DIR <dir>]               # default:
#                                   # ${CMAKE_CURRENT_BINARY_DIR}/<name>_gen
#     [INCLUDE_DESTINATION <dir>])  # where tether_install_proto() puts the
#                                   # headers, relative to the install
#                                   # prefix; default CMAKE_INSTALL_INCLUDEDIR
#                                   # ("include")
#
# Each proto file must lie under one of IMPORT_DIRS; its path relative to that
# root is the path protoc records (and the one `import` statements use), and
# the generated files land at the same relative path under OUT_DIR. OUT_DIR is
# added to the target's PUBLIC include directories as a SYSTEM directory, so
# code including "<path>/<name>.pb.h" builds without warnings from generated
# code; once installed, INCLUDE_DESTINATION takes its place. The generated
# sources get no warning flags and no -Werror. The library is
# position-independent (unless CMAKE_POSITION_INDEPENDENT_CODE says
# otherwise), so it also links into shared objects.
#
# tether_install_proto(): install such a library and its headers.
#
#   tether_install_proto(
#     TARGET <name>                 # made by tether_generate_proto (required)
#     EXPORT <export-set>           # install(EXPORT) set to add it to
#                                   # (required)
#     [LIBRARY_DESTINATION <dir>])  # default CMAKE_INSTALL_LIBDIR ("lib")
#
# The headers keep their paths relative to the proto roots, under the
# target's INCLUDE_DESTINATION; the exported target finds them there.
#
# The library links protobuf::libprotobuf PUBLIC, and gRPC::grpc++ with GRPC,
# and GTest::gmock with MOCKS (the generated mock header includes gmock).
#
# Needs the targets protobuf::protoc (find_package(Protobuf)), with GRPC also
# gRPC::grpc++ and gRPC::grpc_cpp_plugin (find_package(gRPC CONFIG)), with
# MOCKS also GTest::gmock (find_package(GTest)). find_package(tether) finds
# the first two for you.
#
# Example:
#   find_package(tether CONFIG REQUIRED)
#   tether_generate_proto(TARGET feed_proto PROTOS proto/feed.proto
#                         IMPORT_DIRS proto GRPC)
#   target_link_libraries(my_app PRIVATE feed_proto tether::tether)
#   // my_app.cc: #include "feed.grpc.pb.h"

include_guard(GLOBAL)
include(GNUInstallDirs)

function(tether_generate_proto)
  cmake_parse_arguments(PARSE_ARGV 0 arg "GRPC;MOCKS"
                        "TARGET;OUT_DIR;INCLUDE_DESTINATION"
                        "PROTOS;IMPORT_DIRS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tether_generate_proto: unknown arguments: "
                        "${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGET)
    message(FATAL_ERROR "tether_generate_proto: TARGET is required")
  endif()
  if(NOT arg_PROTOS)
    message(FATAL_ERROR "tether_generate_proto(${arg_TARGET}): PROTOS is "
                        "required and must not be empty")
  endif()
  if(arg_MOCKS)
    set(arg_GRPC TRUE)
  endif()
  if(NOT TARGET protobuf::protoc)
    message(FATAL_ERROR "tether_generate_proto: target protobuf::protoc not "
                        "found; call find_package(Protobuf REQUIRED) first")
  endif()
  if(arg_GRPC AND NOT (TARGET gRPC::grpc_cpp_plugin AND TARGET gRPC::grpc++))
    message(FATAL_ERROR "tether_generate_proto: GRPC needs the targets "
                        "gRPC::grpc++ and gRPC::grpc_cpp_plugin; call "
                        "find_package(gRPC CONFIG REQUIRED) first")
  endif()
  if(arg_MOCKS AND NOT TARGET GTest::gmock)
    message(FATAL_ERROR "tether_generate_proto: MOCKS needs the target "
                        "GTest::gmock; call find_package(GTest REQUIRED) first")
  endif()

  set(out_dir "${arg_OUT_DIR}")
  if(NOT out_dir)
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/${arg_TARGET}_gen")
  endif()
  get_filename_component(out_dir "${out_dir}" ABSOLUTE
                         BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")

  set(import_dirs)
  foreach(dir IN LISTS arg_IMPORT_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND import_dirs "${dir}")
  endforeach()

  set(generated_srcs)
  set(generated_hdrs)
  set(all_roots ${import_dirs})
  set(proto_entries)  # "<abs proto>|<root>|<rel path>"
  foreach(proto IN LISTS arg_PROTOS)
    get_filename_component(proto "${proto}" ABSOLUTE
                           BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${proto}")
      message(FATAL_ERROR "tether_generate_proto(${arg_TARGET}): no such "
                          "file: ${proto}")
    endif()
    set(root "")
    foreach(dir IN LISTS import_dirs)
      file(RELATIVE_PATH rel "${dir}" "${proto}")
      if(NOT rel MATCHES "^\\.\\./")
        set(root "${dir}")
        break()
      endif()
    endforeach()
    if(root STREQUAL "")
      if(import_dirs)
        message(FATAL_ERROR "tether_generate_proto(${arg_TARGET}): ${proto} "
                            "is not under any of IMPORT_DIRS: ${import_dirs}")
      endif()
      get_filename_component(root "${proto}" DIRECTORY)
      list(APPEND all_roots "${root}")
    endif()
    file(RELATIVE_PATH rel "${root}" "${proto}")
    list(APPEND proto_entries "${proto}|${root}|${rel}")
  endforeach()
  list(REMOVE_DUPLICATES all_roots)

  set(include_flags)
  foreach(dir IN LISTS all_roots)
    list(APPEND include_flags "-I${dir}")
  endforeach()
  # Well-known types (google/protobuf/*.proto).
  foreach(dir IN LISTS Protobuf_INCLUDE_DIRS Protobuf_INCLUDE_DIR)
    if(EXISTS "${dir}/google/protobuf/descriptor.proto")
      list(APPEND include_flags "-I${dir}")
      break()
    endif()
  endforeach()

  foreach(entry IN LISTS proto_entries)
    string(REPLACE "|" ";" entry "${entry}")
    list(GET entry 0 proto)
    list(GET entry 2 rel)
    string(REGEX REPLACE "\\.proto$" "" stem "${rel}")
    set(outputs "${out_dir}/${stem}.pb.cc" "${out_dir}/${stem}.pb.h")
    list(APPEND generated_srcs "${out_dir}/${stem}.pb.cc")
    list(APPEND generated_hdrs "${out_dir}/${stem}.pb.h")
    set(plugin_args)
    set(plugin_deps)
    if(arg_GRPC)
      list(APPEND outputs "${out_dir}/${stem}.grpc.pb.cc"
                          "${out_dir}/${stem}.grpc.pb.h")
      list(APPEND generated_srcs "${out_dir}/${stem}.grpc.pb.cc")
      list(APPEND generated_hdrs "${out_dir}/${stem}.grpc.pb.h")
      set(grpc_out "${out_dir}")
      if(arg_MOCKS)
        list(APPEND outputs "${out_dir}/${stem}_mock.grpc.pb.h")
        list(APPEND generated_hdrs "${out_dir}/${stem}_mock.grpc.pb.h")
        set(grpc_out "generate_mock_code=true:${out_dir}")
      endif()
      set(plugin_args
        "--plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
        "--grpc_out=${grpc_out}")
      set(plugin_deps "$<TARGET_FILE:gRPC::grpc_cpp_plugin>")
    endif()
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${out_dir}"
      COMMAND protobuf::protoc
              ${include_flags}
              "--cpp_out=${out_dir}"
              ${plugin_args}
              "${proto}"
      WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
      DEPENDS "${proto}" "$<TARGET_FILE:protobuf::protoc>" ${plugin_deps}
      COMMENT "tether_generate_proto: ${rel} -> ${out_dir}"
      COMMAND_EXPAND_LISTS
      VERBATIM)
  endforeach()

  add_library(${arg_TARGET} STATIC ${generated_srcs} ${generated_hdrs})
  target_compile_features(${arg_TARGET} PUBLIC cxx_std_17)
  # Generated code: no project warning flags are added to this target, and
  # the headers are SYSTEM for every user so they do not trip -Werror there.
  set(include_destination "${arg_INCLUDE_DESTINATION}")
  if(NOT include_destination)
    set(include_destination "${CMAKE_INSTALL_INCLUDEDIR}")
  endif()
  target_include_directories(${arg_TARGET} SYSTEM PUBLIC
                             "$<BUILD_INTERFACE:${out_dir}>"
                             "$<INSTALL_INTERFACE:${include_destination}>")
  if(NOT DEFINED CMAKE_POSITION_INDEPENDENT_CODE)
    set_target_properties(${arg_TARGET} PROPERTIES
      POSITION_INDEPENDENT_CODE ON)
  endif()
  target_link_libraries(${arg_TARGET} PUBLIC protobuf::libprotobuf)
  if(arg_GRPC)
    target_link_libraries(${arg_TARGET} PUBLIC gRPC::grpc++)
  endif()
  if(arg_MOCKS)
    target_link_libraries(${arg_TARGET} PUBLIC GTest::gmock)
  endif()
  set_target_properties(${arg_TARGET} PROPERTIES
    TETHER_PROTO_OUT_DIR "${out_dir}"
    TETHER_PROTO_INCLUDE_DESTINATION "${include_destination}")
endfunction()

function(tether_install_proto)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TARGET;EXPORT;LIBRARY_DESTINATION"
                        "")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tether_install_proto: unknown arguments: "
                        "${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_TARGET OR NOT arg_EXPORT)
    message(FATAL_ERROR "tether_install_proto: TARGET and EXPORT are required")
  endif()
  if(NOT TARGET ${arg_TARGET})
    message(FATAL_ERROR "tether_install_proto: no target ${arg_TARGET}")
  endif()
  get_target_property(out_dir ${arg_TARGET} TETHER_PROTO_OUT_DIR)
  get_target_property(include_destination ${arg_TARGET}
                      TETHER_PROTO_INCLUDE_DESTINATION)
  if(NOT out_dir OR NOT include_destination)
    message(FATAL_ERROR "tether_install_proto: ${arg_TARGET} was not made by "
                        "tether_generate_proto")
  endif()
  set(library_destination "${arg_LIBRARY_DESTINATION}")
  if(NOT library_destination)
    set(library_destination "${CMAKE_INSTALL_LIBDIR}")
  endif()
  install(TARGETS ${arg_TARGET} EXPORT ${arg_EXPORT}
    ARCHIVE DESTINATION "${library_destination}")
  install(DIRECTORY "${out_dir}/" DESTINATION "${include_destination}"
    FILES_MATCHING PATTERN "*.h")
endfunction()
