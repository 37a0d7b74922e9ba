// Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
//
// A `main` for a libFuzzer target when it is not built with libFuzzer: runs
// `LLVMFuzzerTestOneInput` once on every file named on the command line, or
// on every regular file of every directory named (sorted by name, not
// recursive). ctest runs the seed corpus and the saved regressions this way
// in every build (gcc, ASan, TSan). Exits non-zero when a path cannot be
// read or holds no input at all; an invariant violation aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                         bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg, ec)) {
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') {
          files.push_back(e.path());
        }
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (!RunFile(f)) return 1;
        ++ran;
      }
    } else {
      if (!RunFile(arg)) return 1;
      ++ran;
    }
  }
  std::fprintf(stderr, "replay: %d input(s) passed\n", ran);
  return ran > 0 ? 0 : 1;
}
