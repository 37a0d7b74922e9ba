#!/usr/bin/env bash
# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# Compile time of user translation units, two pairs: bench/compile_time/
# tu_raw.cc (a hand-written raw gRPC callback reader) against tu_tether.cc
# (the same watch through one tether::ReconnectingStream over a
# ConnectionPool); tu_raw_bidi.cc (a raw reader and a raw bidi reactor)
# against tu_tether_bidi.cc (one ReconnectingStream and one
# ReconnectingBidiStream). The exact commands CMake uses for them
# (compile_commands.json), ccache left out. Runs each RUNS times (default 3)
# alternating within a pair, and prints the medians; the last line is one
# JSON object: tu_raw_s, tu_tether_s, ratio, tu_raw_bidi_s,
# tu_tether_bidi_s, bidi_ratio (target for both ratios: <= 1.5, see
# docs/performance.md). Each ratio is the median of the runs' own ratios
# (a tether TU over the raw TU compiled next to it): this machine's speed
# drifts within minutes, so only compiles made close together compare.
#
#   bench/compile_time.sh BUILD_DIR [RUNS]
#   bench/compile_time.sh --instructions BUILD_DIR
#
# --instructions counts, instead of timing, the instructions the compiler
# proper (cc1plus) executes for each TU, under valgrind (apt-get install
# valgrind; about ten minutes in all). The count does not drift with the
# machine's speed, and its ratios follow the time ratios; the last line is
# one JSON object: tu_raw_instr, tu_tether_instr, ratio, tu_raw_bidi_instr,
# tu_tether_bidi_instr, bidi_ratio.
#
# BUILD_DIR must be configured with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON and
# have built the target compile_time_tus (scripts/bench does both).
set -euo pipefail

instructions=false
if [[ "${1:-}" == "--instructions" ]]; then
  instructions=true
  shift
fi
build_dir="${1:?usage: compile_time.sh [--instructions] BUILD_DIR [RUNS]}"
runs="${2:-3}"
db="${build_dir}/compile_commands.json"
[[ -f "${db}" ]] || { echo "no ${db}: configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON" >&2; exit 2; }

# The command and directory of the entry for FILE (CMake writes one key per
# line). JSON escapes (\" and \\) are undone; the launcher (ccache) dropped.
command_for() {
  local file="$1"
  awk -v want="${file}" '
    /"directory":/ { dir = $0 }
    /"command":/   { cmd = $0 }
    /"file":/ && index($0, want) { print dir; print cmd; exit }
  ' "${db}" | sed -e 's/^[[:space:]]*"[a-z]*": "//' -e 's/",\{0,1\}$//' \
              -e 's/\\"/"/g' -e 's/\\\\/\\/g'
}

declare -A dirs cmds
for tu in tu_raw tu_tether tu_raw_bidi tu_tether_bidi; do
  mapfile -t entry < <(command_for "bench/compile_time/${tu}.cc")
  [[ ${#entry[@]} -eq 2 ]] || { echo "no compile command for ${tu}.cc in ${db}" >&2; exit 2; }
  dirs[${tu}]="${entry[0]}"
  cmd="${entry[1]}"
  cmd="${cmd#*ccache }"                      # no launcher
  cmd="$(sed -e 's/ -o [^ ]*/ -o \/dev\/null/' <<<"${cmd}")"
  cmds[${tu}]="${cmd}"
done

if ${instructions}; then
  command -v valgrind >/dev/null || { echo "--instructions needs valgrind (apt-get install valgrind)" >&2; exit 2; }
  # The compiler proper's command line, as the driver would run it.
  declare -A counts
  for tu in tu_raw tu_tether tu_raw_bidi tu_tether_bidi; do
    cc1="$(cd "${dirs[${tu}]}" && eval "${cmds[${tu}]} -S -###" 2>&1 | grep -m1 cc1plus)"
    log="$(mktemp)"
    (cd "${dirs[${tu}]}" && eval "valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file=${log} ${cc1}" >/dev/null 2>&1)
    counts[${tu}]="$(awk '/Collected/ { print $NF }' "${log}")"
    rm -f "${log}"
    echo "${tu}: ${counts[${tu}]} instructions"
  done
  ratio="$(awk -v a="${counts[tu_raw]}" -v b="${counts[tu_tether]}" 'BEGIN { printf "%.3f", b / a }')"
  bidi_ratio="$(awk -v a="${counts[tu_raw_bidi]}" -v b="${counts[tu_tether_bidi]}" 'BEGIN { printf "%.3f", b / a }')"
  printf '{"tu_raw_instr":%s,"tu_tether_instr":%s,"ratio":%s,"tu_raw_bidi_instr":%s,"tu_tether_bidi_instr":%s,"bidi_ratio":%s}\n' \
    "${counts[tu_raw]}" "${counts[tu_tether]}" "${ratio}" "${counts[tu_raw_bidi]}" "${counts[tu_tether_bidi]}" "${bidi_ratio}"
  exit 0
fi

now() { date +%s.%N; }
declare -A times
for ((i = 0; i < runs; i++)); do
  order=(tu_raw tu_tether tu_raw_bidi tu_tether_bidi)
  ((i % 2 == 1)) && order=(tu_tether tu_raw tu_tether_bidi tu_raw_bidi)
  for tu in "${order[@]}"; do
    t0="$(now)"
    (cd "${dirs[${tu}]}" && eval "${cmds[${tu}]}")
    t1="$(now)"
    times[${tu}]+="$(awk -v a="${t0}" -v b="${t1}" 'BEGIN { printf "%.3f ", b - a }')"
  done
done

median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
raw="$(median "${times[tu_raw]}")"
tether="$(median "${times[tu_tether]}")"
raw_bidi="$(median "${times[tu_raw_bidi]}")"
tether_bidi="$(median "${times[tu_tether_bidi]}")"
# The runs' own ratios, in run order (`times` lists one time per run).
paired() {
  paste -d' ' <(tr ' ' '\n' <<<"$1" | sed '/^$/d') <(tr ' ' '\n' <<<"$2" | sed '/^$/d') |
    awk '{ printf "%.3f ", $2 / $1 }'
}
ratio="$(median "$(paired "${times[tu_raw]}" "${times[tu_tether]}")")"
bidi_ratio="$(median "$(paired "${times[tu_raw_bidi]}" "${times[tu_tether_bidi]}")")"
echo "compile time, ${runs} runs each (alternating), seconds: tu_raw ${times[tu_raw]}; tu_tether ${times[tu_tether]}; tu_raw_bidi ${times[tu_raw_bidi]}; tu_tether_bidi ${times[tu_tether_bidi]}"
echo "medians: tu_raw ${raw} s, tu_tether ${tether} s, ratio ${ratio}; tu_raw_bidi ${raw_bidi} s, tu_tether_bidi ${tether_bidi} s, bidi_ratio ${bidi_ratio}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '{"tu_raw_s":%s,"tu_tether_s":%s,"ratio":%s,"tu_raw_bidi_s":%s,"tu_tether_bidi_s":%s,"bidi_ratio":%s,"runs":%s}\n' "${raw}" "${tether}" "${ratio}" "${raw_bidi}" "${tether_bidi}" "${bidi_ratio}" "${runs}"
