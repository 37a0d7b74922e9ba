// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Compile-time figure (bench/compile_time.sh): a user translation unit that
// instantiates one tether::ReconnectingStream (tu_tether.cc, included whole)
// and one tether::ReconnectingBidiStream for the two calls of
// tu_raw_bidi.cc, over a ConnectionPool. Never run nor linked; built only so
// that its compile command is known.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "tu_tether.cc"  // NOLINT(build/include): the whole server-stream TU
#include "grpcpp/grpcpp.h"
#include "positions.grpc.pb.h"
#include "tether/connection_pool.h"
#include "tether/reconnecting_bidi_stream.h"

namespace tether_compile_time {

using Chat = tether::ReconnectingBidiStream<tether::test::PosRequest,
                                            tether::test::PosEvent>;

absl::StatusOr<std::unique_ptr<Chat>> StartTetherChat(
    const std::shared_ptr<tether::ConnectionPool>& pool) {
  Chat::Spec spec;
  spec.start =
      [](const std::shared_ptr<grpc::Channel>& channel,
         grpc::ClientContext* context,
         grpc::ClientBidiReactor<tether::test::PosRequest,
                                 tether::test::PosEvent>* reactor) {
        tether::test::PosStream::NewStub(channel)->async()->Chat(context,
                                                                 reactor);
      };
  spec.open_requests = [](const tether::ResumeState&) {
    tether::test::PosRequest open;
    open.set_open(true);
    return std::vector<tether::test::PosRequest>{open};
  };
  spec.acknowledges = [](const tether::test::PosRequest& oldest,
                         const tether::test::PosEvent& event) {
    return event.ack() == oldest.write_id();
  };
  return Chat::Start(
      pool, std::move(spec), tether::ReconnectingStreamOptions(),
      [](tether::test::PosEvent&&) {}, [](const absl::Status&) {});
}

}  // namespace tether_compile_time
