#!/usr/bin/env bash
# Every figure issue 53 owes from a 16-core machine, in one call of the device's `run` (well under
# its 10-minute limit), most wanted first. Here, in the project root:
#
#   make devbench     # bin/devbench: pmx, pmxtools, Postgres, kube-apiserver and etcd, within the carry
#
# then on the device machine, with carry ["bin/devbench"]:
#
#   bash hack/devbench/issue53.sh measure   # every figure, into $OUT
#
# The figures, and what the issue asks of each (docs/performance.md, "Row-lock waits and a database
# on another node"):
#
#   closed-8        one pmx dev on the whole machine, 8 shards, closed loop: at least 40,000 orders/s
#                   (more than the last 16-core machine's ceiling, 24,333: docs/performance.md, "The
#                   ceiling counted twice")
#   ceiling-N       one independent pmx dev + Postgres per two cores, at once: closed-8 at least 80% of their sum
#   open-10000      the same at 10,000 offered orders/s: p99 under 15 ms, after a warm-up of 3 s at
#                   that rate (--warmup; the exchange just started is slower at first: the step's
#                   warm-up line gives that second's p99 apart)
#   open-10000-warm the same with the WAL warmed first (--warm-wal): the run writes into WAL files a
#                   checkpoint recycled, as on a server that has run a while, instead of creating and
#                   zero-filling each one while the commits wait (at 10,000/s, two or three a second)
#   open-10000-tuned the same on a Postgres tuned as docs/operations.md says: max_wal_size 16GB (no
#                   checkpoint, so no page written whole again, within the run) and shared_buffers 8GB
#   closed-16       16 shards: faster than closed-8 (and closed-8-again, taken after it)
#   distributed-8x4 pmxtools bench --distributed, 8 shards and 4 fronts: at least 25,000 orders/s;
#                   each pmx shard runs one matching loop per core of its eighth of the machine,
#                   as on a pod with that many cores (by default it runs one per core it sees)
#   latency-1, latency-8   Postgres 1 ms of round trip away (--db-latency): 8 shards at least 4x one
#   closed-16-commit-delay 16 shards with Postgres's commit_delay at 200 µs: whether group commit
#                   shortens the queue for the WAL's flush that keeps 16 shards from beating 8
#
# Every step but the distributed one runs a warm-up of 3 s before its measured run (--warmup), the
# ceiling's pairs too: each shard's first meeting with each bot's account is an acquire its loop
# waits for (8 shards and 512 bots: 4,096 of them, 16 shards twice that), which a running exchange
# has long done; on 2 cores, 8 shards closed loop made 7-11% more once warm, and 16 shards 12-22%
# (docs/performance.md, "What each more shard costs Postgres"). The warm-up lines give the cold
# figures apart.
#
# Every step reports Postgres's backends waiting on row locks per sample, to be near 0. Results
# as issue17.sh's: each step's table and log (NAME.txt), its JSON (NAME.json) and one line per step
# (steps.txt) in $OUT/issue53.tar (default OUT: ./devbench-out), rewritten after every step; a
# failed step is logged and the next one runs; a step that would start past BUDGET seconds (default
# 420) is skipped. Without kube-apiserver and etcd in the pack, the distributed step is skipped.
#
# ONLY="closed-8 ceiling-8" takes only the steps it names (see steps.sh).
#
# SMOKE=1 shortens every run (3 s, 16 bots, 4 markets, 300 offered/s) to check the script on any
# machine; PMXBENCH_RUN names the pack's runner (default bin/devbench/run), and PMXBENCH_DIR the
# folder it unpacks into (default /opt/pmxbench).
set -euo pipefail
name=issue53 budget=${BUDGET:-420}
# shellcheck source=steps.sh
source "$(dirname "$0")/steps.sh"

measure() {
	unpack
	# warm: MiB of WAL, enough for a 15 s run at 10,000/s (about 4 KB an order) within the default
	# max_wal_size (1 GB), up to which a checkpoint keeps recycled files.
	local cores dur=15s bots=512 markets=32 rate=10000 base_bots=64 base_markets=8 warm=960 warmup=3s
	cores=$(nproc)
	if [ "${SMOKE:-}" = 1 ]; then
		dur=3s bots=16 markets=4 rate=300 base_bots=16 base_markets=4 warm=64 warmup=1s
	fi
	local all="0-$((cores - 1))" run=(bench --duration "$dur" --bots "$bots" --markets "$markets")
	machine

	TASKSET=$all step closed-8 "${run[@]}" --shards 8 --warmup "$warmup"
	CEILING_WARMUP=$warmup ceiling "ceiling-$((cores / 2))" "$dur" "$base_bots" "$base_markets"
	TASKSET=$all step open-$rate "${run[@]}" --shards 8 --rate "$rate" --warmup "$warmup"
	TASKSET=$all step open-$rate-warm "${run[@]}" --shards 8 --rate "$rate" --warmup "$warmup" --warm-wal "$warm"
	TASKSET=$all step open-$rate-tuned "${run[@]}" --shards 8 --rate "$rate" --warmup "$warmup" --warm-wal "$warm" \
		--pg-setting max_wal_size=16GB --pg-setting shared_buffers=8GB
	TASKSET=$all step closed-16 "${run[@]}" --shards 16 --warmup "$warmup"
	if [ -x "$k8s/kube-apiserver" ]; then
		TASKSET=$all step distributed-8x4 "${run[@]}" --distributed --kube-assets "$k8s" --shards 8 --fronts 4 \
			--shard-arg=--shards=$((cores / 8 > 0 ? cores / 8 : 1))
	else
		note "distributed-8x4: skipped, no kube-apiserver in $k8s (make devbench packs it)"
	fi
	TASKSET=$all step latency-1 "${run[@]}" --db-latency 1ms --shards 1 --warmup "$warmup"
	TASKSET=$all step latency-8 "${run[@]}" --db-latency 1ms --shards 8 --warmup "$warmup"
	# The two closest comparisons again, in the other order, while the budget lasts.
	TASKSET=$all step closed-16-again "${run[@]}" --shards 16 --warmup "$warmup"
	TASKSET=$all step closed-8-again "${run[@]}" --shards 8 --warmup "$warmup"
	# 16 shards queue for the WAL's flush: whether Postgres's group commit (a committer waits
	# commit_delay µs for others to join its flush when commit_siblings are active) shortens it.
	TASKSET=$all step closed-16-commit-delay "${run[@]}" --shards 16 --warmup "$warmup" --pg-setting commit_delay=200
	echo "== done in $((SECONDS - started))s; results in $out/$name.tar"
	cat "$work/steps.txt"
}

case "${1:-}" in
measure) measure ;;
*) usage ;;
esac
