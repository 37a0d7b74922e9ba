// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// What the simulated servers serve: one log per stream, shared by every
// replica (the fleet's database), and the messages that carry it.
#ifndef TETHER_TEST_SIM_FEED_H_
#define TETHER_TEST_SIM_FEED_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tether/position.h"

namespace tether {
namespace sim {

// One response. An item (first == last), a batch (first < last), a progress
// notice (`progress`: everything up to `last` was sent), or, in a bidi
// stream's log, an item that acknowledges the app's write `ack`.
struct SimMsg {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  bool progress = false;
  std::uint64_t ack = 0;

  Position position() const {
    if (progress) return Position::Progress(last);
    if (first == last) return Position::Item(first);
    return Position::Items(first, last);
  }
  bool SameAs(const SimMsg& o) const {
    return first == o.first && last == o.last && progress == o.progress &&
           ack == o.ack;
  }
  std::string ToString() const {
    std::string s = progress ? absl::StrCat("progress@", last)
                    : first == last ? absl::StrCat("item ", first)
                                    : absl::StrCat("batch ", first, "..", last);
    if (ack) absl::StrAppend(&s, " ack w", ack);
    return s;
  }
};

// A server stream's request: where it resumes.
struct SimReq {
  bool has_after = false;
  std::uint64_t after = 0;
};

// A bidi stream's write: an attempt's open request (resume position) or
// the app's write `id`.
struct SimWrite {
  bool open = false;
  bool has_from = false;
  std::uint64_t from = 0;
  std::uint64_t id = 0;
};

class Call;

// One stream's log. Entries only grow (positions increase); a replica
// serving an attempt sends every entry after the attempt's resume position,
// then each new one. `compacted_below`: a resume position below it cannot
// be served (the call ends OUT_OF_RANGE "compacted", as an etcd watch below
// the compaction point does; the stream must resync).
struct Feed {
  int index = 0;
  bool dense = true;
  std::vector<SimMsg> log;
  std::uint64_t next = 1;  // the next item's position
  std::uint64_t compacted_below = 0;
  // Its stream resyncs, so the store may compact this log.
  bool resyncs = false;
  // Writes the server applied (bidi), by id: each acknowledged once in the
  // log, however often it is replayed.
  std::set<std::uint64_t> applied;
  // Open calls that serve this feed.
  std::vector<std::weak_ptr<Call>> calls;

  // The index of the first entry whose position is above `after`.
  std::size_t FirstAfter(std::uint64_t after) const {
    return static_cast<std::size_t>(
        std::upper_bound(log.begin(), log.end(), after,
                         [](std::uint64_t a, const SimMsg& m) {
                           return a < m.last;
                         }) -
        log.begin());
  }
  // The position everything up to which was produced.
  std::uint64_t head() const { return next - 1; }
};

}  // namespace sim
}  // namespace tether

#endif  // TETHER_TEST_SIM_FEED_H_
