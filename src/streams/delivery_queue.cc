// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "tether/internal/delivery_queue.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tether {
namespace internal {
namespace {

// The owners whose callouts the current thread is inside, innermost last.
std::vector<const void*>& ThreadCallouts() {
  thread_local std::vector<const void*> owners;
  return owners;
}

}  // namespace

CalloutScope::CalloutScope(const void* owner) : owner_(owner) {
  ThreadCallouts().push_back(owner);
}

CalloutScope::~CalloutScope() {
  std::vector<const void*>& owners = ThreadCallouts();
  // Innermost first: scopes nest.
  auto it = std::find(owners.rbegin(), owners.rend(), owner_);
  if (it != owners.rend()) owners.erase(std::next(it).base());
}

int CalloutScope::Depth(const void* owner) {
  const std::vector<const void*>& owners = ThreadCallouts();
  return static_cast<int>(std::count(owners.begin(), owners.end(), owner));
}

absl::Status CallbackThrew(const char* callback, std::exception_ptr error) {
  std::string what = "an exception that is not a std::exception";
  try {
    if (error) std::rethrow_exception(error);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  return absl::InternalError(absl::StrCat("tether: the application's ",
                                          callback, " threw: ", what));
}

}  // namespace internal
}  // namespace tether
