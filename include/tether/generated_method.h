// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Glue for generated gRPC code (grpc_cpp_plugin, callback API): build a
// stream's `start`, or a unary caller's, from a method pointer, and a
// `sequence_of` from a field getter.
//
//   spec.start = tether::StartWith<Ledger>(&Ledger::Stub::async::WatchAccount);
//   spec.sequence_of = tether::SequenceFrom(&AccountEvent::seq);
#ifndef TETHER_GENERATED_METHOD_H_
#define TETHER_GENERATED_METHOD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/types/optional.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/status.h"
#include "tether/function.h"

namespace tether {

// A `StreamSpec::start` that calls a generated server-streaming method:
// `Service::NewStub(channel)->async()->*method`. `Service` is the generated
// service class (the one with `NewStub`); `method` is its callback-API
// method, `&Service::Stub::async::Method` (or the interface's,
// `&Service::StubInterface::async_interface::Method`). In gRPC 1.51 these
// are `void Method(grpc::ClientContext*, const Request*,
// grpc::ClientReadReactor<Response>*)`.
template <class Service, class Async, class Request, class Response>
Function<void(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
              const Request*, grpc::ClientReadReactor<Response>*)>
StartWith(void (Async::*method)(grpc::ClientContext*, const Request*,
                                grpc::ClientReadReactor<Response>*)) {
  return [method](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context, const Request* request,
                  grpc::ClientReadReactor<Response>* reactor) {
    auto stub = Service::NewStub(channel);
    (stub->async()->*method)(context, request, reactor);
  };
}

// The same for a unary method, for `UnaryCaller`: the callback-API form
// `void Method(grpc::ClientContext*, const Request*, Response*,
// std::function<void(grpc::Status)>)` (picked out of the method's overloads
// by its type).
template <class Service, class Async, class Request, class Response>
std::function<void(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
                   const Request*, Response*,
                   std::function<void(grpc::Status)>)>
StartWith(void (Async::*method)(grpc::ClientContext*, const Request*, Response*,
                                std::function<void(grpc::Status)>)) {
  return [method](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context, const Request* request,
                  Response* response,
                  std::function<void(grpc::Status)> on_done) {
    auto stub = Service::NewStub(channel);
    (stub->async()->*method)(context, request, response, std::move(on_done));
  };
}

// The same for a bidi method, for `BidiStreamSpec::start`: the callback-API
// form `void Method(grpc::ClientContext*,
// grpc::ClientBidiReactor<Request, Response>*)`.
template <class Service, class Async, class Request, class Response>
Function<void(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*,
              grpc::ClientBidiReactor<Request, Response>*)>
StartWith(void (Async::*method)(grpc::ClientContext*,
                                grpc::ClientBidiReactor<Request, Response>*)) {
  return [method](const std::shared_ptr<grpc::Channel>& channel,
                  grpc::ClientContext* context,
                  grpc::ClientBidiReactor<Request, Response>* reactor) {
    auto stub = Service::NewStub(channel);
    (stub->async()->*method)(context, reactor);
  };
}

// A `StreamSpec::sequence_of` that reads an unsigned field through its
// generated getter (`&Event::seq`), as `[](const Event& e) { return e.seq();
// }` does. Every value is a position, 0 included: many protocols number
// from 0 (offsets, revisions of a fresh store), and a stream resumes after
// it like after any other. A server that leaves the field unset sends 0: on
// a stream already past 0 that message is dropped as a duplicate (the
// observer hears `OnDuplicateDropped`). Where 0 means "no sequence number"
// (the stream then ends with INTERNAL, a server bug), return nullopt for it
// in a lambda instead.
template <class Message, class Field>
Function<absl::optional<std::uint64_t>(const Message&)> SequenceFrom(
    Field (Message::*getter)() const) {
  return [getter](const Message& m) -> absl::optional<std::uint64_t> {
    return static_cast<std::uint64_t>((m.*getter)());
  };
}

}  // namespace tether

#endif  // TETHER_GENERATED_METHOD_H_
