#!/usr/bin/env bash
# What bounds the 16-core figures (issue 39): after hack/devbench/issue17.sh, on the same kind of
# device machine, with carry ["bin/devbench"]:
#
#   bash hack/devbench/profile16.sh measure
#
# 1. The distributed bench of issue17.sh again (4 shards, 4 fronts, 512 bots, 32 markets) with its
#    processes' logs kept: the errors they logged, counted by message (errors-distributed.txt).
# 2. One pmx dev on the whole machine (512 bots, 32 markets, closed loop) with Go's profiler on:
#    a 10 s CPU profile (cpu.pprof, for go tool pprof here), the goroutines' stacks at mid-run
#    (goroutines.txt), and Postgres's backends sampled every 200 ms for 10 s by state and wait
#    event (waits.txt): what the shards' commits and the reads wait on.
# 3. The same load again with pg_stat_statements (pmxtools bench --statements): Postgres's
#    execution time per order, statement by statement (statements.txt), the feeds on and then off
#    (--no-event-log), so the feeds' share of the statements is read on this machine too.
# Everything goes into $OUT/profile16.tar (default OUT: ./devbench-out).
#
# RATE=10000 profiles open loop at that offered rate instead of closed loop (steps 2 and 3: what
# the tail of the latency waits on), and DISTRIBUTED=0 leaves step 1 out.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runner=${PMXBENCH_RUN:-$root/bin/devbench/run}
b=${PMXBENCH_DIR:-/opt/pmxbench}
out=${OUT:-$root/devbench-out}
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT

pack() { tar -C "$work" -cf "$out/profile16.tar.part" . && mv "$out/profile16.tar.part" "$out/profile16.tar"; }

# get URL FILE: an HTTP GET with curl where there is one, else bash's /dev/tcp (HTTP/1.0, the body
# after the headers).
get() {
	if command -v curl >/dev/null; then
		curl -sS -o "$2" "$1"
		return
	fi
	local hostport=${1#http://} path
	path=/${hostport#*/}
	hostport=${hostport%%/*}
	exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}"
	printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&3
	cat <&3 >"$2.raw"
	exec 3>&-
	local n # the line that ends the headers: a lone CR
	n=$(grep -anm1 $'^\r$' "$2.raw" | cut -d: -f1)
	tail -n +$((n + 1)) "$2.raw" >"$2" && rm -f "$2.raw"
}

measure() {
	mkdir -p "$out"
	bash "$runner" true
	{ date -u +%FT%TZ; nproc; grep -m1 'model name' /proc/cpuinfo || true; } >"$work/machine.txt"

	local rate=() load=closed
	if [ "${RATE:-0}" != 0 ]; then
		rate=(--rate "$RATE") load=open
	fi
	[ "${DISTRIBUTED:-1}" = 0 ] || distributed
	profiled
}

distributed() {
	echo "== distributed, logs kept"
	rm -rf /tmp/p16-dist
	bash "$runner" pmxtools bench --distributed --kube-assets "$b/k8s" --shards 4 --fronts 4 \
		--duration 15s --bots 512 --markets 32 --data-dir /tmp/p16-dist >"$work/distributed.txt" 2>&1 || true
	grep -E '^closed loop' "$work/distributed.txt" || tail -5 "$work/distributed.txt"
	for f in /tmp/p16-dist/run-1/*.log /tmp/p16-dist/run-1/postgres/*.log /tmp/p16-dist/run-1/postgres/log/*; do
		[ -f "$f" ] || continue
		echo "--- $f"
		grep -E 'level=(ERROR|WARN)|FATAL|ERROR:' "$f" | sed -E 's/time=[^ ]+ //; s/[0-9a-f]{8}-[0-9a-f-]{27}/UUID/g; s/[0-9]+/N/g' |
			sort | uniq -c | sort -rn | head -15 || true
	done >"$work/errors-distributed.txt" 2>&1
	head -60 "$work/errors-distributed.txt"
	pack
}

profiled() {
	echo "== pmx dev profiled"
	rm -rf /tmp/p16-dev
	bash "$runner" pmxtools bench --duration 25s --bots 512 --markets 32 "${rate[@]}" --data-dir /tmp/p16-dev \
		--dev-arg=--pprof-addr=127.0.0.1:6060 >"$work/dev.txt" 2>&1 &
	local bench=$! i sock=""
	for ((i = 0; i < 600; i++)); do
		grep -q ' 3s  orders' "$work/dev.txt" 2>/dev/null && break
		sleep 0.1
	done
	sock=$(dirname "$(find /tmp/p16-dev -name '.s.PGSQL.*' -not -name '*.lock' | head -1)")
	get "http://127.0.0.1:6060/debug/pprof/profile?seconds=10" "$work/cpu.pprof" &
	local prof=$!
	(
		for ((i = 0; i < 50; i++)); do
			"$b/root/usr/lib/postgresql/15/bin/psql" -h "$sock" -U postgres -d pmx -AtX -c \
				"select coalesce(backend_type,'?'), coalesce(state,'-'), coalesce(wait_event_type,'CPU'), coalesce(wait_event,'-')
				 from pg_stat_activity where pid <> pg_backend_pid()" 2>&1
			sleep 0.2
		done
	) | sort | uniq -c | sort -rn >"$work/waits.txt" &
	local waits=$!
	sleep 5
	get "http://127.0.0.1:6060/debug/pprof/goroutine?debug=1" "$work/goroutines.txt" || true
	wait "$prof" || true
	wait "$waits" || true
	wait "$bench" || true
	grep -E "^$load" "$work/dev.txt" || tail -5 "$work/dev.txt"
	head -30 "$work/waits.txt"
	pack

	local feeds
	for feeds in on off; do
		echo "== statements, feeds $feeds"
		local extra=()
		[ "$feeds" = off ] && extra=(--dev-arg=--no-event-log)
		bash "$runner" pmxtools bench --statements --duration 15s --bots 512 --markets 32 "${rate[@]}" "${extra[@]}" \
			>"$work/statements-$feeds.txt" 2>&1 || true
		grep -E "^$load" "$work/statements-$feeds.txt" || true
		sed -n '/^statements, run/,/^$/p' "$work/statements-$feeds.txt"
		pack
	done
	ls -la "$work"
}

case "${1:-}" in
measure) measure ;;
*) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
