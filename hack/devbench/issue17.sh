#!/usr/bin/env bash
# Every figure issue 17 asks of a 16-core machine, in one call of the device's `run` (well under
# its 10-minute limit), most wanted first. Here, in the project root:
#
#   make devbench     # bin/devbench: pmx, pmxtools, Postgres, kube-apiserver and etcd, within the carry
#
# then on the device machine, with carry ["bin/devbench"]:
#
#   bash hack/devbench/issue17.sh measure   # every figure, into $OUT
#
# measure keeps each step's table and log (NAME.txt), its full result (NAME.json) and one line per
# step (steps.txt) in $OUT/issue17.tar (default OUT: ./devbench-out), rewritten after every step:
# the device gives back at most 8 files, and what is there if the call is cut short, so the tar
# and a copy of steps.txt are all $OUT holds. A failed step is logged and the next one runs; a
# step that would start past BUDGET seconds (default 480) is skipped, so the call returns with
# what it has. Without kube-apiserver and etcd in the pack (K8S_ASSETS names another folder), the
# distributed step is skipped.
#
# SMOKE=1 shortens every run (3 s, 16 bots, 4 markets, 300 offered/s) to check the script on any
# machine; PMXBENCH_RUN names the pack's runner (default bin/devbench/run), and PMXBENCH_DIR the
# folder it unpacks into (default /opt/pmxbench).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runner=${PMXBENCH_RUN:-$root/bin/devbench/run}
out=${OUT:-$root/devbench-out}
work=$(mktemp -d) # every file of the results, packed into $out/issue17.tar after each step
trap 'rm -rf "$work"' EXIT
k8s=${K8S_ASSETS:-${PMXBENCH_DIR:-/opt/pmxbench}/k8s} # where bin/devbench/run unpacks the pack's k8s/
budget=${BUDGET:-480}

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
	exit 2
}

# step NAME ARGS...: runs pmxtools ARGS through the pack's runner (which may be prefixed by taskset:
# TASKSET=0-7), its table on stdout and in NAME.txt, its JSON in NAME.json. pmxtools bench starts
# the pmx beside it in the pack.
started=$SECONDS
step() {
	local name=$1
	shift
	local elapsed=$((SECONDS - started))
	if [ "$elapsed" -ge "$budget" ]; then
		note "$name: skipped, ${elapsed}s of the ${budget}s budget spent"
		return 0
	fi
	local pin=()
	[ -n "${TASKSET:-}" ] && pin=(taskset -c "$TASKSET")
	echo "== $name: ${pin[*]} pmxtools $*"
	local t0=$SECONDS rc=0
	bash "$runner" "${pin[@]}" pmxtools "$@" --json-file "$work/$name.json" >"$work/$name.txt" 2>&1 || rc=$?
	# The command and the table's rows (the file has the progress and the legend of the columns too).
	awk '/^command / { print } /^(load  |gap  |  requests\/s)/ { rows = 1 } /^$/ { rows = 0 } rows' "$work/$name.txt"
	[ "$rc" = 0 ] || tail -n 5 "$work/$name.txt"
	note "$name: rc=$rc, $((SECONDS - t0))s"
}

# ceiling NAME DURATION BOTS MARKETS: nproc/2 benches at once, bench i pinned to cores 2i and
# 2i+1, each table and JSON as NAME-i.txt and NAME-i.json, and the sum of their orders/s in
# steps.txt.
ceiling() {
	local name=$1 dur=$2 bots=$3 markets=$4
	local elapsed=$((SECONDS - started))
	if [ "$elapsed" -ge "$budget" ]; then
		note "$name: skipped, ${elapsed}s of the ${budget}s budget spent"
		return 0
	fi
	local pairs=$(($(nproc) / 2)) i t0=$SECONDS pids=() rc=0
	echo "== $name: $pairs independent pmxtools bench, two cores each"
	for ((i = 0; i < pairs; i++)); do
		bash "$runner" taskset -c "$((2 * i)),$((2 * i + 1))" pmxtools bench --duration "$dur" \
			--bots "$bots" --markets "$markets" --json-file "$work/$name-$i.json" >"$work/$name-$i.txt" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=$?; done
	local sum
	sum=$(cat "$work/$name"-*.json 2>/dev/null | grep -o '"ordersPerSec": *[0-9.]*' | awk -F: '{ s += $2 } END { printf "%.0f", s }')
	note "$name: rc=$rc, $((SECONDS - t0))s, $pairs pairs, sum ${sum:-?} orders/s"
}

# note adds a line to steps.txt and brings $out up to date.
note() {
	echo "$1" | tee -a "$work/steps.txt"
	cp "$work/steps.txt" "$out/steps.txt"
	tar -C "$work" -cf "$out/issue17.tar.part" . && mv "$out/issue17.tar.part" "$out/issue17.tar"
}

measure() {
	[ -x "$runner" ] || { echo "no runner at $runner: run make devbench here, then carry bin/devbench" >&2; exit 1; }
	mkdir -p "$out"
	local t0=$SECONDS
	bash "$runner" true # unpacks the pack, once
	echo "pack unpacked in $((SECONDS - t0))s"
	local cores dur=15s bots=512 markets=32 rate=10000 few=16 base_bots=64 base_markets=8
	cores=$(nproc)
	if [ "${SMOKE:-}" = 1 ]; then
		dur=3s bots=16 markets=4 rate=300 few=4 base_bots=16 base_markets=4
	fi
	local all="0-$((cores - 1))"
	{
		echo "date: $(date -u +%FT%TZ)"
		echo "cores: $cores"
		grep -m1 'model name' /proc/cpuinfo || true
		grep MemTotal /proc/meminfo || true
		uname -r
	} | tee "$work/machine.txt"

	# The targets: one pmx dev on one Postgres, the whole machine, closed loop and 10,000/s offered.
	TASKSET=$all step closed-all bench --duration "$dur" --bots "$bots" --markets "$markets"
	TASKSET=$all step open-all bench --duration "$dur" --bots "$bots" --markets "$markets" --rate "$rate"
	# The ceiling: one independent pmx dev + Postgres per pair of cores, all at once (64 bots,
	# 8 markets each, each pinned to its own two cores); their sum is what the whole machine makes
	# when nothing is shared, the figure the one-pmx steps are set against.
	ceiling "ceiling-$((cores / 2))" "$dur" "$base_bots" "$base_markets"
	# The distributed exchange, 4 shards and 4 fronts on one Postgres.
	if [ -x "$k8s/kube-apiserver" ]; then
		TASKSET=$all step distributed-4 bench --distributed --kube-assets "$k8s" --shards 4 --fronts 4 \
			--duration "$dur" --bots "$bots" --markets "$markets"
	else
		note "distributed-4: skipped, no kube-apiserver in $k8s (make devbench packs it)"
	fi
	# The issue's table redone: 64 bots, 8 markets, pinned to 2, 4, 8 and 16 cores.
	local n=2
	while [ "$n" -le "$cores" ]; do
		TASKSET=0-$((n - 1)) step "closed-$n" bench --duration "$dur" --bots "$base_bots" --markets "$base_markets"
		n=$((n * 2))
	done
	# What one durable commit and one HTTP request cost on this machine, to set against the 2-core one's.
	step commit-floor bench commit --gaps 0,300us,1ms,3ms,10ms --count 200
	step http-floor bench http --duration 5s
	# Hot accounts: a few bots, each trading in every market, so every shard's batches carry them.
	TASKSET=$all step closed-hot bench --duration "$dur" --bots "$few" --markets "$markets"
	# One shard per core instead of one per two.
	TASKSET=$all step closed-all-shards-per-core bench --duration "$dur" --bots "$bots" --markets "$markets" \
		--dev-arg=--shards="$cores"
	# What the market and account feeds cost on the whole machine: the first step again, without them.
	TASKSET=$all step closed-all-no-event-log bench --duration "$dur" --bots "$bots" --markets "$markets" \
		--dev-arg=--no-event-log
	echo "== done in $((SECONDS - started))s; results in $out/issue17.tar"
	cat "$work/steps.txt"
}

case "${1:-}" in
measure) measure ;;
*) usage ;;
esac
