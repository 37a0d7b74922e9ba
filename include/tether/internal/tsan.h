// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Internal: happens-before edges through gRPC for ThreadSanitizer.
//
// Debian's gRPC is not built with TSan, so TSan cannot see that a reaction
// (OnReadDone, OnDone) runs after the call that started its operation. We
// tell it: `HandOff` before starting a gRPC operation, `TakeOver` at the top
// of each reaction, both on the reactor's address. Without TSan they compile
// to nothing.
#ifndef TETHER_INTERNAL_TSAN_H_
#define TETHER_INTERNAL_TSAN_H_

#if defined(__SANITIZE_THREAD__)
#define TETHER_INTERNAL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TETHER_INTERNAL_TSAN 1
#endif
#endif

#ifdef TETHER_INTERNAL_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace tether {
namespace internal {

inline void HandOff(void* addr) {
#ifdef TETHER_INTERNAL_TSAN
  __tsan_release(addr);
#else
  (void)addr;
#endif
}

inline void TakeOver(void* addr) {
#ifdef TETHER_INTERNAL_TSAN
  __tsan_acquire(addr);
#else
  (void)addr;
#endif
}

}  // namespace internal
}  // namespace tether

#endif  // TETHER_INTERNAL_TSAN_H_
