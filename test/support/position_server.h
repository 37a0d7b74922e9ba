// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#ifndef TETHER_TEST_SUPPORT_POSITION_SERVER_H_
#define TETHER_TEST_SUPPORT_POSITION_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tether {
namespace testsupport {

// The items of tether.test.PosStream are at 10k+1, 10k+4, 10k+7 (k >= 0).
// The first item above position `p`, and the last one at or below it (0:
// none).
std::uint64_t PosNextItem(std::uint64_t p);
std::uint64_t PosPrevItem(std::uint64_t p);

// A real gRPC server (sync API) on 127.0.0.1 serving tether.test.PosStream
// (test/proto/positions.proto): three items per batch, one batch per
// `tick`, resuming one item early (so a resumed call's first batch always
// straddles the resume position), a progress notice after every 4th batch,
// compaction, and a bidi method that acknowledges writes. `Shutdown(grace)` is a graceful shutdown: GOAWAY at once, calls
// cancelled at the deadline.
//
// Thread safety: every method from any thread, but not concurrently with
// the destructor (which kills the server).
class PositionServer {
 public:
  explicit PositionServer(std::string name,
                          absl::Duration tick = absl::Milliseconds(2));
  ~PositionServer();

  absl::Status Start();
  std::string address() const;
  // GOAWAY now; calls still open at now + grace are cancelled. Blocks.
  void Shutdown(absl::Duration grace);
  // Resumes from below `position` are refused from now on.
  void Compact(std::uint64_t position);
  // Ends every open call with UNAVAILABLE (the server keeps serving).
  void EndAllCalls();

  // `after` of every Watch/Chat open, in arrival order.
  std::vector<std::uint64_t> opens() const;
  // The "x-attempt" metadata of every Chat open ("" when absent), in
  // arrival order.
  std::vector<std::string> chat_attempt_tags() const;
  // Every write_id received by Chat, in arrival order (replays included).
  std::vector<std::uint64_t> write_ids() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace testsupport
}  // namespace tether

#endif  // TETHER_TEST_SUPPORT_POSITION_SERVER_H_
