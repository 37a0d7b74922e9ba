// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
// Where streams and unary calls open their attempts.
#ifndef TETHER_TARGET_H_
#define TETHER_TARGET_H_

#include <memory>
#include <type_traits>
#include <utility>

#include "tether/transport.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace tether {

// Where a stream or a unary call opens its attempts: one channel, or a `ConnectionSource`
// such as a `ConnectionPool` (drain-aware). Implicitly built from either.
// A pool creates its own channels (credentials and interceptors come from
// `ConnectionPoolOptions`); a single channel is the caller's: build it with
// `grpc::experimental::CreateCustomChannelWithInterceptors` to intercept.
class Target {
 public:
  Target(std::shared_ptr<grpc::Channel> channel)  // NOLINT: implicit
      : source_(SingleChannelSource(std::move(channel))) {}
  Target(std::shared_ptr<ConnectionSource> source)  // NOLINT: implicit
      : source_(std::move(source)) {}
  template <class Source, class = std::enable_if_t<
                              std::is_base_of<ConnectionSource, Source>::value>>
  Target(std::shared_ptr<Source> source)  // NOLINT: implicit
      : source_(std::move(source)) {}

  const std::shared_ptr<ConnectionSource>& source() const { return source_; }

 private:
  std::shared_ptr<ConnectionSource> source_;
};

}  // namespace tether

#endif  // TETHER_TARGET_H_
