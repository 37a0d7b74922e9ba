#!/usr/bin/env bash
# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Makes a copy of Debian 12's libgrpc.so.29 that skips the completion
# queue's debug-only tag bookkeeping, as a gRPC built with -DNDEBUG does, so
# that a bench can be run against both in one sitting:
#
#   bash bench/release_grpc.sh /tmp/release-grpc
#   LD_LIBRARY_PATH=/tmp/release-grpc ./build/bench/scale_bench
#
# Why: Debian builds gRPC without NDEBUG. Then every operation started on a
# completion queue appends its tag to a list (grpc_cq_begin_op), and every
# completion searches that list linearly from the front (cq_check_tag) to
# assert that the tag was there. A call's long-lived tags sit at the front,
# so with N calls on one queue (the callback API keeps one per channel and
# one per server) each completion reads about N entries: with 10,000 streams
# on one connection, about a third of all CPU goes to that loop.
#
# The copy changes two functions and nothing else:
#   grpc_cq_begin_op  -> jumps straight to the queue's own begin_op, the
#                        NDEBUG body;
#   cq_check_tag      -> returns at once, the NDEBUG body.
# It works on one exact file only (libgrpc29 1.51.1-3+b1, amd64, checked by
# its SHA-256 and by the bytes at both places) and refuses anything else.
# Nothing in tether's build or tests uses it.
set -euo pipefail

out="${1:-}"
if [[ -z "${out}" ]]; then
  echo "usage: $0 OUT_DIR   (writes OUT_DIR/libgrpc.so.29)" >&2
  exit 2
fi
src="/usr/lib/x86_64-linux-gnu/libgrpc.so.29.0.0"
want_sha="3a193dd3b22b8f1ad470fc726257718379951dbbf754bf51854b878dc7768458"
# File offsets (.text is mapped at its file offset in this library).
begin_op=$((0x4f3440))   # exported: _Z16grpc_cq_begin_opP21grpc_completion_queuePv
check_tag=$((0x4f1400))  # static cq_check_tag(cq, tag, lock_cq)
# What is there now: begin_op's prologue up to the gpr_mu_lock call, and
# check_tag's prologue.
begin_op_was="554889f5534889fb4883ec08488b7f10"
check_tag_was="41544189d4554889fd534889f384d275"
# mov 0x18(%rdi),%rax (cq->vtable); jmp *0x28(%rax) (vtable->begin_op):
# the cq and the tag are still in %rdi and %rsi.
begin_op_new='\x48\x8b\x47\x18\xff\x60\x28'
check_tag_new='\xc3'  # ret

die() { echo "release_grpc.sh: $*" >&2; exit 1; }
[[ -f "${src}" ]] || die "${src} not found (is libgrpc29 installed?)"
have_sha="$(sha256sum "${src}" | cut -d' ' -f1)"
[[ "${have_sha}" == "${want_sha}" ]] \
  || die "${src} is not the libgrpc29 1.51.1-3+b1 (amd64) this script knows (sha256 ${have_sha})"

bytes_at() {  # FILE OFFSET COUNT -> the bytes in hex, no spaces
  od -A n -t x1 -j "$2" -N "$3" "$1" | tr -d ' \n'
}
[[ "$(bytes_at "${src}" "${begin_op}" 16)" == "${begin_op_was}" ]] \
  || die "unexpected bytes at grpc_cq_begin_op"
[[ "$(bytes_at "${src}" "${check_tag}" 16)" == "${check_tag_was}" ]] \
  || die "unexpected bytes at cq_check_tag"

mkdir -p "${out}"
tmp="${out}/libgrpc.so.29.tmp"
cp "${src}" "${tmp}"
printf '%b' "${begin_op_new}" | dd of="${tmp}" bs=1 seek="${begin_op}" \
  conv=notrunc status=none
printf '%b' "${check_tag_new}" | dd of="${tmp}" bs=1 seek="${check_tag}" \
  conv=notrunc status=none
mv "${tmp}" "${out}/libgrpc.so.29"
echo "wrote ${out}/libgrpc.so.29; run a bench with LD_LIBRARY_PATH=${out}"
