// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Symbol visibility in a shared libtether. Everything declared in the
// library's own headers (under src/, between TETHER_BEGIN_HIDDEN and
// TETHER_END_HIDDEN) is hidden when the library is compiled: it is not part
// of the ABI and never stands in for anything of the application's. A
// public class that holds such a type by pointer forward-declares it with
// TETHER_HIDDEN_TYPE and is itself marked TETHER_API: the mark says the
// class is exported, and keeps GCC from warning that it is more visible
// than its fields.
//
//   namespace internal { class TETHER_HIDDEN_TYPE PoolCore; }
//   class TETHER_API ConnectionPool { std::shared_ptr<internal::PoolCore> core_; };

#ifndef TETHER_INTERNAL_VISIBILITY_H_
#define TETHER_INTERNAL_VISIBILITY_H_

#if defined(__GNUC__) || defined(__clang__)
#define TETHER_API __attribute__((visibility("default")))
#else
#define TETHER_API
#endif

// TETHER_BUILDING_LIBRARY is defined (privately) for the library's own
// sources by CMakeLists.txt. Elsewhere (applications, tests) the library's
// types keep default visibility, so tests' doubles may hold and derive
// from them.
#if defined(TETHER_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define TETHER_HIDDEN_TYPE __attribute__((visibility("hidden")))
#define TETHER_BEGIN_HIDDEN _Pragma("GCC visibility push(hidden)")
#define TETHER_END_HIDDEN _Pragma("GCC visibility pop")
#else
#define TETHER_HIDDEN_TYPE
#define TETHER_BEGIN_HIDDEN
#define TETHER_END_HIDDEN
#endif

#endif  // TETHER_INTERNAL_VISIBILITY_H_
