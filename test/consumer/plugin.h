// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// The consumer's shared object: application code and tether (its static,
// position-independent library, or libtether.so) linked into a .so that
// the consumer executable loads.
#ifndef TETHER_CONSUMER_PLUGIN_H_
#define TETHER_CONSUMER_PLUGIN_H_

#include <string>

namespace consumer {

// Watches a real Feed server on 127.0.0.1 through a `ReconnectingStream`
// over a `ConnectionPool` (gRPC's callbacks run tether's code, which runs
// this object's): "" when 50 events arrive once each and in order, else
// what went wrong.
std::string StreamThroughSharedObject();

}  // namespace consumer

#endif  // TETHER_CONSUMER_PLUGIN_H_
