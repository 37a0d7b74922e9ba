// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_FUNCTION_H_
#define TETHER_FUNCTION_H_

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace tether {

template <class Signature>
class Function;

namespace internal {

// Callables that can be null: stored as an empty `Function` when they are.
template <class F>
struct IsNullableCallable
    : std::integral_constant<bool, std::is_pointer<F>::value ||
                                       std::is_member_pointer<F>::value> {};
template <class S>
struct IsNullableCallable<std::function<S>> : std::true_type {};
template <class S>
struct IsNullableCallable<Function<S>> : std::true_type {};

}  // namespace internal

// What stream specs and stream callbacks hold: a copyable function object
// with the interface and the meaning of `std::function<R(Args...)>`.
//
// It takes what `std::function` takes (a lambda, a function or member
// pointer, a functor, a `std::function`) and is empty in the same cases
// (default, `nullptr`, a null pointer, an empty `std::function`); calling an
// empty one throws `std::bad_function_call`. It differs in what it costs a
// translation unit that stores a lambda: one call function per callable
// (plus one copy-or-destroy function unless the callable is trivially
// copyable), where `std::function` instantiates a manager and about
// eighteen helpers. Every stream spec's field is one, so this is most of a
// stream's compile cost in the app's code (docs/performance.md, "Compile
// time"). Callables that fit in a pointer and are trivially copyable
// (captureless lambdas, function pointers, a lambda capturing one pointer)
// are stored inline; others on the heap. 24 bytes.
//
//   tether::Function<bool(const Event&)> is_notice =
//       [](const Event& e) { return e.kind() == Event::DRAIN; };
//   std::function<bool(const Event&)> same = is_notice;  // converts both ways
namespace internal {

// What every `Function` holds, apart from its signature: the callable
// (inline or on the heap), its call function (type-erased) and, for a heap
// callable, how to copy and destroy it. Copies, moves, swaps and
// destruction are these non-template members, compiled once per
// translation unit instead of once per signature.
class FunctionStorage {
 public:
  explicit operator bool() const noexcept { return call_ != nullptr; }

 protected:
  union Storage {
    void* heap;
    alignas(void*) unsigned char local[sizeof(void*)];
  };
  // Copies (`destroy` false: returns the copy) or destroys a heap callable.
  using ManageFn = void* (*)(void*, bool destroy);
  // Any function pointer type: the call function, cast back to its own
  // type by the signature that stored it.
  using ErasedFn = void (*)();

  FunctionStorage() noexcept = default;
  FunctionStorage(const FunctionStorage& other)
      : storage_(other.storage_), call_(other.call_), manage_(other.manage_) {
    if (manage_ != nullptr) storage_.heap = manage_(other.storage_.heap, false);
  }
  FunctionStorage(FunctionStorage&& other) noexcept
      : storage_(other.storage_), call_(other.call_), manage_(other.manage_) {
    other.call_ = nullptr;
    other.manage_ = nullptr;
  }
  FunctionStorage& operator=(const FunctionStorage& other) {
    FunctionStorage(other).swap(*this);
    return *this;
  }
  FunctionStorage& operator=(FunctionStorage&& other) noexcept {
    FunctionStorage(std::move(other)).swap(*this);
    return *this;
  }
  ~FunctionStorage() {
    if (manage_ != nullptr) manage_(storage_.heap, true);
  }

  void swap(FunctionStorage& other) noexcept {
    std::swap(storage_, other.storage_);
    std::swap(call_, other.call_);
    std::swap(manage_, other.manage_);
  }
  void reset() noexcept { FunctionStorage().swap(*this); }

  mutable Storage storage_{};
  ErasedFn call_ = nullptr;
  ManageFn manage_ = nullptr;  // null: empty, or stored inline
};

}  // namespace internal

template <class R, class... Args>
class Function<R(Args...)> : private internal::FunctionStorage {
  template <class F, class D = std::decay_t<F>>
  using IfCallable = std::enable_if_t<!std::is_same<D, Function>::value &&
                                      std::is_invocable_r<R, D&, Args...>::value>;

 public:
  using FunctionStorage::operator bool;

  Function() noexcept = default;
  Function(std::nullptr_t) noexcept {}  // NOLINT(runtime/explicit)

  template <class F, class = IfCallable<F>>
  Function(F&& f) {  // NOLINT(runtime/explicit): as std::function
    using D = std::decay_t<F>;
    // A function reference (decayed to a pointer in D) is never null.
    if constexpr (internal::IsNullableCallable<
                      std::remove_cv_t<std::remove_reference_t<F>>>::value) {
      if (!f) return;
    }
    if constexpr (kInline<D>) {
      ::new (static_cast<void*>(storage_.local)) D(std::forward<F>(f));
    } else {
      storage_.heap = new D(std::forward<F>(f));
      manage_ = &Manage<D>;
    }
    call_ = reinterpret_cast<ErasedFn>(&Call<D>);
  }

  Function& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  template <class F, class = IfCallable<F>>
  Function& operator=(F&& f) {
    Function made(std::forward<F>(f));
    FunctionStorage::swap(made);
    return *this;
  }

  void swap(Function& other) noexcept { FunctionStorage::swap(other); }

  R operator()(Args... args) const {
    if (call_ == nullptr) throw std::bad_function_call();
    return reinterpret_cast<CallFn>(call_)(storage_,
                                           std::forward<Args>(args)...);
  }

  friend bool operator==(const Function& f, std::nullptr_t) noexcept {
    return !f;
  }
  friend bool operator!=(const Function& f, std::nullptr_t) noexcept {
    return static_cast<bool>(f);
  }
  friend bool operator==(std::nullptr_t, const Function& f) noexcept {
    return !f;
  }
  friend bool operator!=(std::nullptr_t, const Function& f) noexcept {
    return static_cast<bool>(f);
  }

 private:
  using CallFn = R (*)(Storage&, Args&&...);

  template <class D>
  static constexpr bool kInline = sizeof(D) <= sizeof(void*) &&
                                  alignof(D) <= alignof(void*) &&
                                  std::is_trivially_copyable<D>::value;

  // Calls the callable of type `D` in `s` (inline or on the heap): one
  // function per stored callable.
  template <class D>
  static R Call(Storage& s, Args&&... args) {
    D* f;
    if constexpr (kInline<D>) {
      f = std::launder(reinterpret_cast<D*>(s.local));
    } else {
      f = static_cast<D*>(s.heap);
    }
    if constexpr (std::is_member_pointer<D>::value) {
      return static_cast<R>(std::invoke(*f, std::forward<Args>(args)...));
    } else if constexpr (std::is_void<R>::value) {
      (*f)(std::forward<Args>(args)...);
    } else {
      return (*f)(std::forward<Args>(args)...);
    }
  }
  template <class D>
  static void* Manage(void* f, bool destroy) {
    if (destroy) {
      delete static_cast<D*>(f);
      return nullptr;
    }
    return new D(*static_cast<const D*>(f));
  }
};

}  // namespace tether

#endif  // TETHER_FUNCTION_H_
