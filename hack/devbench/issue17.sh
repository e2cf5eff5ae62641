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
name=issue17 budget=${BUDGET:-480}
# shellcheck source=steps.sh
source "$(dirname "$0")/steps.sh"

measure() {
	unpack
	local cores dur=15s bots=512 markets=32 rate=10000 few=16 base_bots=64 base_markets=8
	cores=$(nproc)
	if [ "${SMOKE:-}" = 1 ]; then
		dur=3s bots=16 markets=4 rate=300 few=4 base_bots=16 base_markets=4
	fi
	local all="0-$((cores - 1))"
	machine

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
