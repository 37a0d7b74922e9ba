// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A background writer for tests and benchmarks: puts N new keys under a
// prefix, one at a time, and records each put's revision and when etcd
// acknowledged it.
#ifndef TETHER_EXAMPLES_ETCD_ETCD_WRITER_H_
#define TETHER_EXAMPLES_ETCD_ETCD_WRITER_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "examples/etcd/etcd_client.h"

namespace tether {
namespace examples {
namespace etcd {

struct WrittenKey {
  std::string key;
  std::int64_t revision = 0;  // the put's revision (the key's mod_revision)
  absl::Time acked;           // when the put's answer arrived
};

// Puts `count` keys "<prefix>k00000", "<prefix>k00001", ... (or until
// `Stop`) with PutIfAbsent (a put retried after a lost answer is applied
// once), pausing `interval` between puts. Each put may retry across the
// endpoints for up to `put_timeout`; a put that still fails stops the writer
// with that error.
//
// Thread-safe; the writer runs on its own thread between Start and Join
// (the destructor joins).
class EtcdWriter {
 public:
  EtcdWriter(EtcdClient* client, std::string prefix, int count,
             absl::Duration interval,
             absl::Duration put_timeout = absl::Seconds(30));
  ~EtcdWriter();

  void Start();
  // Puts nothing after the put in flight (if any); `Join` then returns OK
  // with the puts so far.
  void Stop();
  // Waits for the last put (or the error); its status.
  absl::Status Join();

  // The puts acknowledged so far, in order.
  std::vector<WrittenKey> written() const;
  // Waits until `n` puts are acknowledged (or the writer ended), up to
  // `timeout`; true if they are.
  bool WaitForWritten(int n, absl::Duration timeout) const;

 private:
  void Run();

  EtcdClient* const client_;
  const std::string prefix_;
  const int count_;
  const absl::Duration interval_;
  const absl::Duration put_timeout_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<WrittenKey> written_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace etcd
}  // namespace examples
}  // namespace tether

#endif  // TETHER_EXAMPLES_ETCD_ETCD_WRITER_H_
