#!/usr/bin/env bash
# Two pmx builds alternated on the device machine in one call: the pack's pmx against pmx-before,
# which `PMX_BEFORE=/path/to/pmx make devbench` packs beside it (with NO_K8S=1 when the carry
# has no room for both: then no distributed run). Then, with carry ["bin/devbench"]:
#
#   bash hack/devbench/ab.sh measure
#
# Or keep the full pack and bring the other build in a later call on the same warm machine (the
# pack carried before, and its unpacked copy, stay there between calls): `xz -T1 -9e -c
# /path/to/pmx >bin/devbench-before/pmx-before.xz` here, then run this with carry
# ["bin/devbench-before"]; it unpacks that file as pmx-before.
#
# ROUNDS (default 3) rounds of before and after on the whole machine (512 bots, 32 markets, closed
# loop), then one round of both in open loop at OPEN_RATE offered orders/s if it is set, then
# PINNED_ROUNDS (default 2) rounds pinned to two cores (64 bots, 8 markets), then the pack's pmx
# in the distributed bench (4 shards, 4 fronts) if the pack has kube-apiserver; every run DURATION
# (default 15s). Each run's table goes into $OUT/ab.tar (default OUT: ./devbench-out) as it ends,
# one line each in ab-steps.txt; a run that would start past BUDGET seconds (default 240) is
# skipped.
set -euo pipefail
name=ab budget=${BUDGET:-240} rounds=${ROUNDS:-3}
# shellcheck source=alternate.sh
source "$(dirname "$0")/alternate.sh"

measure() {
	mkdir -p "$out"
	bash "$runner" true
	local carried=$root/bin/devbench-before/pmx-before.xz
	if [ -f "$carried" ]; then
		xz -dc "$carried" >"$b/pmx-before" && chmod 755 "$b/pmx-before"
	fi
	[ -x "$b/pmx-before" ] || { echo "no pmx-before in the pack: PMX_BEFORE=... make devbench" >&2; exit 1; }
	{
		echo "date: $(date -u +%FT%TZ) cores: $(nproc)"
		grep -m1 'model name' /proc/cpuinfo || true
	} | tee "$work/machine.txt"
	local r all="0-$(($(nproc) - 1))"
	for ((r = 1; r <= rounds; r++)); do
		run "r$r-before-all" "$all" --pmx "$b/pmx-before" --bots 512 --markets 32
		run "r$r-after-all" "$all" --pmx "$b/pmx" --bots 512 --markets 32
	done
	if [ -n "${OPEN_RATE:-}" ]; then
		run "open-before-all" "$all" --pmx "$b/pmx-before" --bots 512 --markets 32 --rate "$OPEN_RATE"
		run "open-after-all" "$all" --pmx "$b/pmx" --bots 512 --markets 32 --rate "$OPEN_RATE"
	fi
	for ((r = 1; r <= ${PINNED_ROUNDS:-2}; r++)); do
		run "r$r-before-2" 0-1 --pmx "$b/pmx-before"
		run "r$r-after-2" 0-1 --pmx "$b/pmx"
	done
	if [ -x "$b/k8s/kube-apiserver" ]; then
		run distributed-4 "$all" --pmx "$b/pmx" --distributed --kube-assets "$b/k8s" --shards 4 --fronts 4 --bots 512 --markets 32
	fi
	echo "== done in $((SECONDS - started))s"
	cat "$work/steps.txt"
}

case "${1:-}" in
measure) measure ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
