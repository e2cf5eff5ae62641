#!/usr/bin/env bash
# What Postgres's own settings do to the 16-core figures (issue 39): the bench's Postgres runs with
# the server's defaults (shared_buffers 128MB, max_wal_size 1GB), under which a closed-loop run on
# 16 cores writes enough WAL to start a checkpoint part way through. On a device machine, after
# hack/devbench/issue17.sh (or with carry ["bin/devbench"]):
#
#   bash hack/devbench/pgsettings.sh measure
#
# Rounds (ROUNDS, default 2) of, on all cores, 512 bots, 32 markets, DURATION each (default 15s):
# the defaults, closed loop; the settings PGSET (default max_wal_size=16GB shared_buffers=8GB),
# closed loop; the same without the feeds (--no-event-log); then open loop at 10,000/s with the
# defaults and with PGSET. Every table goes into $OUT/pgsettings.tar (default OUT:
# ./devbench-out) after each run, with its WAL line in the steps; a run that would start past
# BUDGET seconds (default 300) is skipped.
set -euo pipefail
name=pgsettings budget=${BUDGET:-300} rounds=${ROUNDS:-2}
# shellcheck source=alternate.sh
source "$(dirname "$0")/alternate.sh"

measure() {
	mkdir -p "$out"
	bash "$runner" true
	local all="0-$(($(nproc) - 1))" set=() s r
	for s in ${PGSET:-max_wal_size=16GB shared_buffers=8GB}; do set+=(--pg-setting "$s"); done
	{
		echo "date: $(date -u +%FT%TZ) cores: $(nproc) settings: ${set[*]}"
		grep -m1 'model name' /proc/cpuinfo || true
	} | tee "$work/machine.txt"
	local load=(--bots 512 --markets 32)
	for ((r = 1; r <= rounds; r++)); do
		run "r$r-default" "$all" "${load[@]}"
		run "r$r-tuned" "$all" "${load[@]}" "${set[@]}"
		run "r$r-tuned-no-event-log" "$all" "${load[@]}" "${set[@]}" --dev-arg=--no-event-log
	done
	run "open-default" "$all" "${load[@]}" --rate 10000
	run "open-tuned" "$all" "${load[@]}" "${set[@]}" --rate 10000
	echo "== done in $((SECONDS - started))s"
	cat "$work/steps.txt"
}

case "${1:-}" in
measure) measure ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
