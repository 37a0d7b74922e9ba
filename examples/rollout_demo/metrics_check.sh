#!/usr/bin/env bash
# Copyright 2026 The tether Authors. Licensed under the Apache License 2.0.
#
# ctest examples.rollout_demo.metrics: runs `rollout_demo --quick
# --metrics=127.0.0.1:0`, scrapes its /metrics with curl while the rollouts
# run, and checks that the tether client's counters moved: every watch open,
# first attempts and migrations counted, connections opened, the breaker's
# state published.
#
#   metrics_check.sh ROLLOUT_DEMO WORK_DIR
set -euo pipefail
demo="$1"
work="$2"
mkdir -p "${work}"
out="${work}/demo.out"
scrape="${work}/scrape.txt"
: > "${scrape}"

"${demo}" --quick --svg="${work}/demo.svg" --metrics=127.0.0.1:0 \
  > "${out}" 2>&1 &
pid=$!
trap 'kill "${pid}" 2>/dev/null || true' EXIT

# The URL is printed before the watches start; wait for it (bounded).
url=""
for _ in $(seq 1 300); do
  url="$(grep -o 'http://[^ ]*/metrics' "${out}" || true)"
  [[ -n "${url}" ]] && break
  kill -0 "${pid}" 2>/dev/null || break
  sleep 0.1
done
[[ -n "${url}" ]] || { cat "${out}"; echo "FAIL: no metrics URL"; exit 1; }

# Scrape until the demo ends (it ends on its own; the ctest timeout bounds
# it), keeping the largest value seen of each series.
declare -A max
while kill -0 "${pid}" 2>/dev/null; do
  if curl -sS --fail --max-time 5 "${url}" > "${scrape}.new" 2>/dev/null; then
    while read -r name value; do
      [[ "${name}" == tether_client_* ]] || continue
      key="${name%%\{*}"
      if [[ -z "${max[${key}]:-}" ]] || \
         awk -v a="${value}" -v b="${max[${key}]}" 'BEGIN{exit !(a>b)}'; then
        max[${key}]="${value}"
      fi
    done < <(awk '$1 !~ /^#/ && NF==2 {
                 split($1, p, "{"); s[p[1]] += $2 }
               END { for (k in s) print k, s[k] }' "${scrape}.new")
    mv "${scrape}.new" "${scrape}"
  fi
  sleep 0.5
done
wait "${pid}" || { cat "${out}"; echo "FAIL: rollout_demo failed"; exit 1; }
trap - EXIT

fail=0
expect_at_least() {  # NAME MIN
  local v="${max[$1]:-0}"
  if awk -v a="${v}" -v b="$2" 'BEGIN{exit !(a>=b)}'; then
    echo "ok   $1 reached ${v} (>= $2)"
  else
    echo "FAIL $1 reached ${v}, expected >= $2"
    fail=1
  fi
}
# --quick runs 8 tether watches through three rolling restarts.
expect_at_least tether_client_streams_open 8
expect_at_least tether_client_attempt_started_total 16
expect_at_least tether_client_migrations_total 8
expect_at_least tether_client_connections_opened_total 2
expect_at_least tether_client_attempt_duration_seconds_count 8
expect_at_least tether_client_breaker_state 1
exit "${fail}"
