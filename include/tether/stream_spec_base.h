// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_STREAM_SPEC_BASE_H_
#define TETHER_STREAM_SPEC_BASE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "tether/function.h"
#include "tether/observer.h"
#include "tether/position.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace tether {

// What a server stream's spec (`StreamSpec`) and a bidi stream's spec
// (`BidiStreamSpec`) share: how to read positions or cursors from a
// response, when and how to resync, which message is a drain notice, and
// each attempt's context. Both specs extend it; set the fields on the spec
// itself (`spec.sequence_of = ...`). The stream checks them when it starts:
// a field that needs another, or two that exclude each other, give
// INVALID_ARGUMENT naming the spec and the field, and nothing starts.
//
// Every function here is app code: the stream calls it from any thread,
// with no tether lock held. A reopen resumes after the last delivered
// position or cursor: a server stream writes it into its request
// (`StreamSpec::resume_after`, `resume_from_cursor`), a bidi stream hands it
// to `open_requests`.
template <class Response>
struct StreamSpecBase {
  // Reads the sequence number of a response; nullopt when the message has
  // none, which ends the stream with INTERNAL (a server bug, not a retry).
  // Any callable returning something convertible to
  // `absl::optional<std::uint64_t>` fits: `[](const Event& e) { return
  // e.seq(); }` needs no explicit return type; `tether::SequenceFrom(
  // &Event::seq)` reads a getter, 0 included as a position.
  // Leave empty (and `position_of`, `cursor_of`) for streams without
  // positions: every reopen then starts over and every message is delivered.
  Function<absl::optional<std::uint64_t>(const Response&)> sequence_of;

  // General positions (instead of `sequence_of`, which is
  // `Position::Item(seq)` with dense spacing): what each response says
  // about the stream's position (tether/position.h: None, Item, Items,
  // Progress).
  Function<Position(const Response&)> position_of;
  // kDense (default): a skip is a gap (`gap_policy`); kSparse: any increase
  // is fine. Needs `position_of`.
  PositionSpacing spacing = PositionSpacing::kDense;
  // Removes the items at or below `last_delivered` from a batch that
  // straddles it (a reopen's or migration's overlap), so each item is
  // delivered once. Without it such a batch ends the stream with
  // FAILED_PRECONDITION. Needs `position_of`.
  Function<void(Response&, std::uint64_t last_delivered)> trim_delivered;
  // Whether progress notices (`Position::Progress`) reach the app. Default
  // false: they only move the resume position. Needs `position_of`.
  bool deliver_progress = false;

  // Opaque cursors, for servers that send in order and resume strictly after
  // a cursor (instead of `sequence_of`/`position_of`): the response's
  // cursor, nullopt for a control message (delivered, nothing moves).
  // During a migration's overlap, the new attempt's messages whose cursor
  // the stream delivered since that attempt's resume cursor are dropped.
  Function<absl::optional<std::string>(const Response&)> cursor_of;
  // The cursor the first attempt already resumes after, if any. Needs
  // `cursor_of`.
  absl::optional<std::string> initial_cursor;

  // Resync (integer positions only): a message (`resync_on_message`) or an
  // attempt end (`resync_on_end`) that says "cannot resume from here"
  // (etcd: a canceled watch with compact_revision; HTTP 410). The stream
  // cancels its attempts, calls `resync` on a thread of its resync pool
  // (`ReconnectingStreamOptions::resync_pool`; blocking is fine there, it
  // typically lists the current state, and one hung listing delays no other
  // stream's resync while the pool has threads to spare), then
  // resumes after the position `resync` gives. The triggering message is
  // not delivered. `resync` needs a trigger and vice versa.
  Function<bool(const Response&)> resync_on_message;
  Function<bool(const absl::Status&)> resync_on_end;
  Function<void(ResyncDone done)> resync;

  // Drain notices: the server's own message that says "this server is
  // leaving" (what `tether::server::DrainHooks::send_notice` sends). True
  // for such a message. On one, the stream moves exactly as when its
  // connection announces a drain (a GOAWAY; with `migrate_on_drain`): a new
  // attempt resumes from the last delivered position, the old one runs on
  // until the new one delivers (a bidi stream's new attempt carries the
  // writes, replaying the unacknowledged ones). Nothing counts against the
  // breaker or the reopen budget; the observer sees `OnDrainNotice`, then an
  // attempt started for `AttemptReason::kDrainNotice`. The connection is not
  // marked draining: behind an L7 proxy it is healthy, and the new call goes
  // through the proxy again. If it lands on the leaving server, that server
  // sends a notice again and the stream moves again: 8 moves in a row at
  // once, then at most 10 a second (never a spin). A notice carries no
  // position (the position readers never see it). Called for every message.
  // Default empty: no notices.
  Function<bool(const Response&)> is_drain_notice;
  // Whether drain notices also reach the app, in order with the other
  // messages. Default false. Needs `is_drain_notice`.
  bool deliver_drain_notice = false;

  // Optional: sets up each attempt's context (metadata, a per-attempt
  // deadline, ...), knowing which attempt this is (`info.attempt`,
  // `info.reason`: first, reopen, migration, resync or drain notice;
  // `info.resumed`/`info.resume_after_seq`; `info.connection_id`). Called
  // once per attempt, before the spec's `start`. For example:
  //   spec.configure_attempt = [](grpc::ClientContext& ctx,
  //                               const tether::AttemptInfo& info) {
  //     ctx.AddMetadata("x-attempt", std::to_string(info.attempt));
  //   };
  Function<void(grpc::ClientContext&, const AttemptInfo&)>
      configure_attempt;
};

}  // namespace tether

#endif  // TETHER_STREAM_SPEC_BASE_H_
