// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/etcd_writer.h"

#include <thread>
#include <utility>

#include "absl/strings/str_format.h"

namespace tether {
namespace examples {
namespace etcd {

EtcdWriter::EtcdWriter(EtcdClient* client, std::string prefix, int count,
                       absl::Duration interval, absl::Duration put_timeout)
    : client_(client),
      prefix_(std::move(prefix)),
      count_(count),
      interval_(interval),
      put_timeout_(put_timeout) {}

EtcdWriter::~EtcdWriter() {
  if (thread_.joinable()) thread_.join();
}

void EtcdWriter::Start() { thread_ = std::thread([this] { Run(); }); }

void EtcdWriter::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

absl::Status EtcdWriter::Join() {
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  return status_;
}

std::vector<WrittenKey> EtcdWriter::written() const {
  absl::MutexLock lock(&mu_);
  return written_;
}

bool EtcdWriter::WaitForWritten(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ || static_cast<int>(written_.size()) >= n;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  return static_cast<int>(written_.size()) >= n;
}

void EtcdWriter::Run() {
  absl::Status status;
  for (int i = 0; i < count_; ++i) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    std::string key = absl::StrFormat("%sk%05d", prefix_, i);
    auto put = client_->PutIfAbsent(key, absl::StrFormat("%d", i),
                                    absl::Now() + put_timeout_);
    absl::Time acked = absl::Now();
    if (!put.ok()) {
      status = put.status();
      break;
    }
    {
      absl::MutexLock lock(&mu_);
      written_.push_back(WrittenKey{key, put->revision, acked});
    }
    if (interval_ > absl::ZeroDuration()) absl::SleepFor(interval_);
  }
  absl::MutexLock lock(&mu_);
  status_ = status;
  finished_ = true;
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
