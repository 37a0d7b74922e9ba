// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#include "examples/etcd/etcd_client.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace tether {
namespace examples {
namespace etcd {

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

absl::StatusOr<std::vector<std::string>> ParseEndpoints(
    absl::string_view list) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  if (list.empty()) {
    return absl::InvalidArgumentError("endpoints: empty list");
  }
  for (absl::string_view e : absl::StrSplit(list, ',')) {
    std::string endpoint(e);
    if (endpoint.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("endpoints: empty entry in \"", list, "\""));
    }
    std::size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0 ||
        colon + 1 == endpoint.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoints: \"", endpoint, "\" is not HOST:PORT"));
    }
    if (!seen.insert(endpoint).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("endpoints: \"", endpoint, "\" given twice"));
    }
    out.push_back(std::move(endpoint));
  }
  return out;
}

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

namespace {

// Errors another member (or a later try) may not have.
bool TryElsewhere(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

}  // namespace

EtcdClient::EtcdClient(std::vector<std::string> endpoints,
                       absl::Duration rpc_timeout)
    : rpc_timeout_(rpc_timeout) {
  absl::MutexLock lock(&mu_);
  endpoints_ = std::move(endpoints);
  for (const std::string& e : endpoints_) channels_.push_back(NewChannel(e));
}

std::vector<std::string> EtcdClient::endpoints() const {
  absl::MutexLock lock(&mu_);
  return endpoints_;
}

void EtcdClient::SetEndpoints(std::vector<std::string> endpoints) {
  if (endpoints.empty()) return;
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& e : endpoints) {
    auto kept = std::find(endpoints_.begin(), endpoints_.end(), e);
    channels.push_back(kept == endpoints_.end()
                           ? NewChannel(e)
                           : channels_[kept - endpoints_.begin()]);
  }
  // The endpoint that answered last keeps its turn if it stays.
  auto current = std::find(endpoints.begin(), endpoints.end(),
                           endpoints_[current_ % endpoints_.size()]);
  current_ = current == endpoints.end() ? 0 : current - endpoints.begin();
  endpoints_ = std::move(endpoints);
  channels_ = std::move(channels);
}

std::shared_ptr<grpc::Channel> EtcdClient::NewChannel(
    const std::string& endpoint) {
  grpc::ChannelArguments args;
  // Its own subchannels: a replaced channel really connects again.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 300);
  // An IPv4 literal skips the DNS resolver.
  std::string target = endpoint;
  if (!endpoint.empty() && endpoint[0] >= '0' && endpoint[0] <= '9') {
    target = "ipv4:" + endpoint;
  }
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

std::shared_ptr<grpc::Channel> EtcdClient::ChannelFor(std::size_t i,
                                                      std::size_t* count) {
  absl::MutexLock lock(&mu_);
  *count = channels_.size();
  return channels_[i % channels_.size()];
}

void EtcdClient::ReplaceChannel(const std::shared_ptr<grpc::Channel>& failed) {
  // gRPC 1.51's pick_first leaves a channel whose connects were refused idle
  // (up to ~10 s here) before it tries again; a restarted member would look
  // down that long. A new channel connects at once.
  absl::MutexLock lock(&mu_);
  auto it = std::find(channels_.begin(), channels_.end(), failed);
  if (it != channels_.end()) {
    *it = NewChannel(endpoints_[it - channels_.begin()]);
  }
}

template <class Call>
grpc::Status EtcdClient::WithFailover(absl::Time deadline, Call call) {
  grpc::Status last(grpc::StatusCode::DEADLINE_EXCEEDED,
                    "deadline passed before the first try");
  std::size_t index;
  {
    absl::MutexLock lock(&mu_);
    index = current_;
  }
  for (int tries = 0;; ++tries) {
    absl::Time now = absl::Now();
    if (tries > 0 && now >= deadline) return last;
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(std::min(deadline, now + rpc_timeout_)));
    std::size_t count;
    std::shared_ptr<grpc::Channel> channel = ChannelFor(index, &count);
    index %= count;
    last = call(channel, &context);
    if (last.ok()) {
      absl::MutexLock lock(&mu_);
      current_ = index;
      return last;
    }
    if (!TryElsewhere(last)) return last;
    if (last.error_code() == grpc::StatusCode::UNAVAILABLE) {
      ReplaceChannel(channel);
    }
    index = (index + 1) % count;
    if (index == 0 || count == 1) {
      // Went round every endpoint: pause before the next round.
      absl::SleepFor(std::min(absl::Milliseconds(50),
                              std::max(absl::ZeroDuration(),
                                       deadline - absl::Now())));
    }
  }
}

absl::StatusOr<Listing> EtcdClient::List(absl::string_view prefix,
                                         absl::Time deadline) {
  etcdserverpb::RangeRequest request;
  request.set_key(std::string(prefix));
  request.set_range_end(PrefixEnd(prefix));
  etcdserverpb::RangeResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        response.Clear();
        return etcdserverpb::KV::NewStub(channel)->Range(context, request,
                                                         &response);
      });
  if (!s.ok()) return ToAbsl(s);
  Listing listing;
  listing.revision = response.header().revision();
  for (const mvccpb::KeyValue& kv : response.kvs()) {
    listing.keys[kv.key()] = kv.mod_revision();
  }
  return listing;
}

absl::StatusOr<PutResult> EtcdClient::Put(absl::string_view key,
                                          absl::string_view value,
                                          absl::Time deadline) {
  etcdserverpb::PutRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  etcdserverpb::PutResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        return etcdserverpb::KV::NewStub(channel)->Put(context, request,
                                                       &response);
      });
  if (!s.ok()) return ToAbsl(s);
  PutResult result;
  result.revision = response.header().revision();
  return result;
}

absl::StatusOr<PutResult> EtcdClient::PutIfAbsent(absl::string_view key,
                                                  absl::string_view value,
                                                  absl::Time deadline) {
  etcdserverpb::TxnRequest request;
  etcdserverpb::Compare* cmp = request.add_compare();
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_key(std::string(key));
  cmp->set_create_revision(0);
  etcdserverpb::PutRequest* put =
      request.add_success()->mutable_request_put();
  put->set_key(std::string(key));
  put->set_value(std::string(value));
  request.add_failure()->mutable_request_range()->set_key(std::string(key));
  etcdserverpb::TxnResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        response.Clear();
        return etcdserverpb::KV::NewStub(channel)->Txn(context, request,
                                                       &response);
      });
  if (!s.ok()) return ToAbsl(s);
  PutResult result;
  if (response.succeeded()) {
    result.revision = response.header().revision();
    return result;
  }
  result.written = false;
  if (response.responses_size() == 1 &&
      response.responses(0).has_response_range() &&
      response.responses(0).response_range().kvs_size() == 1) {
    result.revision =
        response.responses(0).response_range().kvs(0).mod_revision();
    return result;
  }
  return absl::InternalError(
      absl::StrCat("put-if-absent of \"", key,
                   "\": the compare failed but the key was not found"));
}

absl::StatusOr<std::int64_t> EtcdClient::Delete(absl::string_view key,
                                                absl::Time deadline) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(std::string(key));
  etcdserverpb::DeleteRangeResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        return etcdserverpb::KV::NewStub(channel)->DeleteRange(
            context, request, &response);
      });
  if (!s.ok()) return ToAbsl(s);
  return response.header().revision();
}

absl::Status EtcdClient::Compact(std::int64_t revision, absl::Time deadline) {
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(true);
  etcdserverpb::CompactionResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        return etcdserverpb::KV::NewStub(channel)->Compact(context, request,
                                                           &response);
      });
  if (!s.ok() && s.error_code() == grpc::StatusCode::OUT_OF_RANGE &&
      absl::StrContains(s.error_message(), "compacted")) {
    return absl::OkStatus();  // already compacted at or past `revision`
  }
  return ToAbsl(s);
}

absl::StatusOr<etcdserverpb::StatusResponse> EtcdClient::Status(
    std::size_t endpoint, absl::Duration timeout) {
  std::size_t count;
  std::shared_ptr<grpc::Channel> channel = ChannelFor(endpoint, &count);
  if (endpoint >= count) return absl::InvalidArgumentError("no such endpoint");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  etcdserverpb::StatusResponse response;
  grpc::Status s = etcdserverpb::Maintenance::NewStub(channel)->Status(
      &context, etcdserverpb::StatusRequest(), &response);
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) ReplaceChannel(channel);
  if (!s.ok()) return ToAbsl(s);
  return response;
}

absl::StatusOr<std::vector<etcdserverpb::Member>> EtcdClient::MemberList(
    absl::Time deadline) {
  etcdserverpb::MemberListResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        response.Clear();
        return etcdserverpb::Cluster::NewStub(channel)->MemberList(
            context, etcdserverpb::MemberListRequest(), &response);
      });
  if (!s.ok()) return ToAbsl(s);
  return std::vector<etcdserverpb::Member>(response.members().begin(),
                                           response.members().end());
}

absl::StatusOr<etcdserverpb::Member> EtcdClient::MemberAdd(
    const std::string& peer_url, absl::Time deadline) {
  etcdserverpb::MemberAddRequest request;
  request.add_peerurls(peer_url);
  etcdserverpb::MemberAddResponse response;
  grpc::Status s = WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        return etcdserverpb::Cluster::NewStub(channel)->MemberAdd(
            context, request, &response);
      });
  if (!s.ok()) return ToAbsl(s);
  return response.member();
}

absl::Status EtcdClient::MemberRemove(std::uint64_t id, absl::Time deadline) {
  etcdserverpb::MemberRemoveRequest request;
  request.set_id(id);
  etcdserverpb::MemberRemoveResponse response;
  return ToAbsl(WithFailover(
      deadline, [&](const std::shared_ptr<grpc::Channel>& channel,
                    grpc::ClientContext* context) {
        return etcdserverpb::Cluster::NewStub(channel)->MemberRemove(
            context, request, &response);
      }));
}

}  // namespace etcd
}  // namespace examples
}  // namespace tether
