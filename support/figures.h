// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// Shared by tether's benchmark programs, the demo and the etcd example's CLI:
// one percentile definition, one way to print a distribution, and the
// last-line JSON object each of them prints (built as a google.protobuf.Struct
// and printed by protobuf's JSON printer, so the output is valid JSON whatever
// the figure or string). Header-only; every user links protobuf anyway.
//
//   tether::support::JsonLine out;
//   out.Set("graceful_p99_ms", tether::support::Percentile(v, 0.99));
//   out.Set("errors", 0);
//   out.Print();   // {"errors":0,"graceful_p99_ms":9.8}
#ifndef TETHER_SUPPORT_FIGURES_H_
#define TETHER_SUPPORT_FIGURES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace tether {
namespace support {

// The nearest-rank percentile: the smallest value with at least `p` (in
// [0, 1]) of the values at or below it. `Percentile(v, 1.0)` is the max,
// `Percentile(v, 0.0)` the min. NaN for no values.
inline double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  p = std::min(1.0, std::max(0.0, p));
  const auto rank = static_cast<std::size_t>(
      std::ceil(p * static_cast<double>(values.size())));
  return values[rank == 0 ? 0 : std::min(values.size(), rank) - 1];
}

inline double Median(const std::vector<double>& values) {
  if (values.empty()) return NAN;
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// "n=64 p50 3.00 ms, p99 9.90 ms, max 10.20 ms".
inline std::string Distribution(const std::vector<double>& ms) {
  return absl::StrFormat("n=%d p50 %.2f ms, p99 %.2f ms, max %.2f ms",
                         ms.size(), Percentile(ms, 0.5), Percentile(ms, 0.99),
                         Percentile(ms, 1.0));
}

// One JSON object, printed as the last line of a bench's output. A NaN or
// infinite figure (nothing measured) is printed as null.
class JsonLine {
 public:
  void Set(const std::string& name, double value) {
    google::protobuf::Value& v = (*doc_.mutable_fields())[name];
    if (std::isfinite(value)) {
      // Three decimals are plenty for ms and ratios, and keep the line short.
      v.set_number_value(std::round(value * 1000.0) / 1000.0);
    } else {
      v.set_null_value(google::protobuf::NULL_VALUE);
    }
  }
  void Set(const std::string& name, int value) {
    Set(name, static_cast<double>(value));
  }
  void Set(const std::string& name, std::int64_t value) {
    Set(name, static_cast<double>(value));
  }
  void Set(const std::string& name, std::uint64_t value) {
    Set(name, static_cast<double>(value));
  }
  void Set(const std::string& name, bool value) {
    (*doc_.mutable_fields())[name].set_bool_value(value);
  }
  void Set(const std::string& name, const std::string& value) {
    (*doc_.mutable_fields())[name].set_string_value(value);
  }
  void Set(const std::string& name, const char* value) {
    Set(name, std::string(value));
  }
  // A nested object.
  void Set(const std::string& name, const JsonLine& value) {
    *(*doc_.mutable_fields())[name].mutable_struct_value() = value.doc_;
  }

  std::string ToString() const {
    std::string out;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    if (!google::protobuf::util::MessageToJsonString(doc_, &out, options)
             .ok()) {
      return "{}";
    }
    return out;
  }

  // Prints the object on a line of its own and flushes.
  void Print() const {
    std::fflush(stderr);
    std::printf("%s\n", ToString().c_str());
    std::fflush(stdout);
  }

 private:
  google::protobuf::Struct doc_;
};

}  // namespace support
}  // namespace tether

#endif  // TETHER_SUPPORT_FIGURES_H_
