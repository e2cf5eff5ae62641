#!/usr/bin/env bash
# Issue 39's feeds' cost on a quiet machine: three builds under one driver, alternated round by
# round, each run pinned to the same two cores (TASKSET, default 0-1) so that a many-core device
# machine stands in for a quiet 2-core one. Run after hack/devbench/issue17.sh on the same warm
# device machine (the pack is unpacked there already), carrying the base build too:
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/devbench-base/pmx ./cmd/pmx  # at 14b4c8f
#   xz -T0 bin/devbench-base/pmx
#   # run, carry ["bin/devbench", "bin/devbench-base"] (or only the base while the pack is unpacked):
#   bash hack/devbench/issue39.sh measure
#
# Rounds (ROUNDS, default 3) of: head with the feeds, head with --no-event-log, base with the feeds
# (closed loop, 64 bots, 8 markets, DURATION each, default 15s); then head and base at 1,000
# offered/s, twice. Every table goes into $OUT/issue39.tar (default OUT: ./devbench-out) after
# each run, and a step that would start past BUDGET seconds (default 300) is skipped.
set -euo pipefail
name=issue39 budget=${BUDGET:-300} rounds=${ROUNDS:-3} pin=${TASKSET:-0-1}
# shellcheck source=alternate.sh
source "$(dirname "$0")/alternate.sh"

measure() {
	mkdir -p "$out"
	if [ -f "$root/bin/devbench/bundle.tar.xz" ]; then
		bash "$runner" true
	fi
	[ -x "$b/pmx" ] || { echo "no pack unpacked in $b: carry bin/devbench" >&2; exit 1; }
	local base=$root/bin/devbench-base/pmx
	[ -f "$base.xz" ] && xz -dkf "$base.xz"
	[ -x "$base" ] || { echo "no base build at $base" >&2; exit 1; }
	{
		echo "date: $(date -u +%FT%TZ) cores: $(nproc) pinned: $pin"
		grep -m1 'model name' /proc/cpuinfo || true
	} | tee "$work/machine.txt"
	local r
	for ((r = 1; r <= rounds; r++)); do
		run "r$r-head-on" "$pin" --pmx "$b/pmx"
		run "r$r-head-off" "$pin" --pmx "$b/pmx" --dev-arg=--no-event-log
		run "r$r-base-on" "$pin" --pmx "$base"
	done
	for r in 1 2; do
		run "r$r-head-1000" "$pin" --pmx "$b/pmx" --rate 1000
		run "r$r-base-1000" "$pin" --pmx "$base" --rate 1000
	done
	echo "== done in $((SECONDS - started))s"
	cat "$work/steps.txt"
}

case "${1:-}" in
measure) measure ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
