# shellcheck shell=bash
# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Shared setup for scripts/test and scripts/demo. Source it; do not run it.
#
#   tether_ensure_packages [PKG...]
#                            apt-get installs the build dependencies (or the
#                            packages named), only if some are missing
#                            (Debian 12; needs root or sudo)
#   tether_configure DIR ARGS...
#                            configures tether into DIR with Ninja, ccache
#                            when present, plus ARGS
#   tether_build DIR [TARGET...]
#                            builds with $TETHER_JOBS jobs (default 2)
#
# Environment: TETHER_JOBS (default 2), TETHER_SKIP_APT=1 to never touch apt.

TETHER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TETHER_JOBS="${TETHER_JOBS:-2}"
# ccache: paths below the checkout are hashed as relative ones and the
# working directory is left out, so that a fresh clone in another folder
# (as CI makes) hits what an earlier clone compiled. Without this every
# object misses (the build uses -g and absolute include paths).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-${TETHER_ROOT}}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

TETHER_APT_PACKAGES=(
  build-essential
  cmake
  ninja-build
  ccache
  pkg-config
  libgrpc++-dev
  protobuf-compiler-grpc
  libprotobuf-dev
  protobuf-compiler
  libabsl-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  prometheus-cpp-dev
  curl
  etcd-server
  etcd-client
  # tether::server's proxy tests: a drain behind an L7 proxy.
  nginx-light
  haproxy
  doxygen
  dnsmasq-base
  libc-ares-dev
)

# Only for scripts/test --fuzz: clang and libFuzzer. The normal build (gcc)
# does not need them.
TETHER_FUZZ_APT_PACKAGES=(
  clang-14
  libfuzzer-14-dev
)

tether_log() {
  printf '[tether] %s\n' "$*" >&2
}

tether_die() {
  printf '[tether] error: %s\n' "$*" >&2
  exit 1
}

# Prints the packages named (default: TETHER_APT_PACKAGES) that are not
# installed.
tether_missing_packages() {
  local pkg status
  local -a wanted=("$@")
  if [[ ${#wanted[@]} -eq 0 ]]; then
    wanted=("${TETHER_APT_PACKAGES[@]}")
  fi
  for pkg in "${wanted[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null \
      || true)"
    if [[ "${status}" != "installed" ]]; then
      printf '%s\n' "${pkg}"
    fi
  done
}

tether_ensure_packages() {
  if [[ "${TETHER_SKIP_APT:-0}" == "1" ]]; then
    tether_log "TETHER_SKIP_APT=1: not checking packages"
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    tether_log "no dpkg-query (not Debian?): assuming dependencies are present"
    return 0
  fi
  local -a missing
  mapfile -t missing < <(tether_missing_packages "$@")
  if [[ ${#missing[@]} -eq 0 ]]; then
    tether_log "build dependencies already installed"
    return 0
  fi
  tether_log "installing missing packages: ${missing[*]}"
  local -a sudo=()
  if [[ "$(id -u)" != "0" ]]; then
    command -v sudo >/dev/null 2>&1 \
      || tether_die "missing packages (${missing[*]}); run as root or install sudo"
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

# tether_configure BUILD_DIR [CMAKE_ARGS...]
tether_configure() {
  local build_dir="$1"
  shift
  local -a args=(-S "${TETHER_ROOT}" -B "${build_dir}" -G Ninja)
  if command -v ccache >/dev/null 2>&1; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  tether_log "cmake ${args[*]} $*"
  cmake "${args[@]}" "$@"
}

# tether_build BUILD_DIR [TARGET...]
tether_build() {
  local build_dir="$1"
  shift
  local -a targets=()
  if [[ $# -gt 0 ]]; then
    targets=(--target "$@")
  fi
  tether_log "cmake --build ${build_dir} -j${TETHER_JOBS} ${targets[*]}"
  cmake --build "${build_dir}" --parallel "${TETHER_JOBS}" "${targets[@]}"
}
