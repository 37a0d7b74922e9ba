// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Compile-time figure (bench/compile_time.sh): a user translation unit that
// instantiates one tether::ReconnectingStream for the watch of tu_raw.cc,
// over a ConnectionPool. Never run; built only so that its compile command
// is known.
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "seqstream.grpc.pb.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_stream.h"

namespace tether_compile_time {

using Watch =
    tether::ReconnectingStream<tether::test::WatchRequest, tether::test::Event>;

absl::StatusOr<std::unique_ptr<Watch>> StartTetherWatch(
    const std::shared_ptr<tether::ConnectionPool>& pool) {
  Watch::Spec spec;
  spec.start = [](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context,
                  const tether::test::WatchRequest* request,
                  grpc::ClientReadReactor<tether::test::Event>* reactor) {
    tether::test::SeqStream::NewStub(channel)->async()->Watch(context, request,
                                                              reactor);
  };
  spec.request.set_key("k");
  spec.sequence_of = [](const tether::test::Event& e) {
    return absl::optional<std::uint64_t>(e.seq());
  };
  spec.resume_after = [](tether::test::WatchRequest& r, std::uint64_t seq) {
    r.set_after_seq(seq);
  };
  return Watch::Start(
      pool, std::move(spec), tether::ReconnectingStreamOptions(),
      [](tether::test::Event&&) {}, [](const absl::Status&) {});
}

}  // namespace tether_compile_time
