#!/usr/bin/env bash
# `make demo`: the exchange (pmx dev, on its private Postgres under DEMO_DATA_DIR), the example
# market maker (examples/marketmaker) quoting the first open market, and three noise traders
# (examples/noisetrader) trading against it, so that a market page shows a live market within a
# minute. Ctrl-C stops them all: the bots first (the market maker cancels its quotes), then pmx.
#
# BIN holds pmx, marketmaker and noisetrader (default bin); DEMO_ADDR and DEMO_METRICS_ADDR are
# pmx dev's --addr and --metrics-addr (default 127.0.0.1:8080 and 127.0.0.1:9090); DEMO_PMX_FLAGS
# adds to its flags (e.g. --database-url); DEMO_DATA_DIR is its --data-dir (default .pmx, the one
# `make run` uses too); PMX_ADMIN_TOKEN, when set, is its admin token.
#
# The demo runs its own exchange, never one it finds: it refuses to start when its address is
# taken or another pmx dev holds its data dir (a `make run` beside it, say), and its readiness
# check asks the pmx dev it started, which must still be running when /readyz answers.
set -euo pipefail
# Each job in a process group of its own: Ctrl-C reaches this script alone, which stops the bots
# before pmx, so that the market maker can still cancel its quotes.
set -m
bin=${BIN:-bin}
addr=${DEMO_ADDR:-127.0.0.1:8080}
metrics=${DEMO_METRICS_ADDR:-127.0.0.1:9090}
data=${DEMO_DATA_DIR:-.pmx}
base="http://$addr"
# What to say when another exchange is in the way.
own="stop the other (Ctrl-C where it runs), or give the demo its own: make demo DEMO_ADDR=127.0.0.1:8081 DEMO_METRICS_ADDR=127.0.0.1:9091 DEMO_DATA_DIR=.pmx-demo"

host=${addr%:*}
host=${host#[}
host=${host%]}
if (exec 3<>"/dev/tcp/${host:-127.0.0.1}/${addr##*:}") 2>/dev/null; then
	echo "demo: something already listens on $addr (another pmx dev, such as a \`make run\`?): $own" >&2
	exit 1
fi
lock="$data/postgres/pgcluster.lock" # pmx dev's private Postgres holds it while it runs (package pgcluster)
if [ -e "$lock" ] && command -v flock >/dev/null && ! flock -n "$lock" true; then
	echo "demo: another pmx dev holds the data dir $data (its Postgres is running; a \`make run\`?): $own" >&2
	exit 1
fi

bots=()
pmx=
stop() {
	trap - EXIT INT TERM
	for pid in "${bots[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
	for pid in "${bots[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ -n "$pmx" ]; then
		kill -INT "$pmx" 2>/dev/null || true
		wait "$pmx" 2>/dev/null || true
	fi
}
trap stop EXIT
trap 'exit 0' INT TERM

# shellcheck disable=SC2086 # DEMO_PMX_FLAGS is a list of flags
"$bin/pmx" dev --addr "$addr" --metrics-addr "$metrics" --data-dir "$data" ${DEMO_PMX_FLAGS:-} &
pmx=$!
# Ready when the pmx dev started above answers on its address, and is still running: whatever
# else might answer there (one that took the address meanwhile) is not the demo's.
ready=
for _ in $(seq 1 240); do
	kill -0 "$pmx" 2>/dev/null || { echo "demo: pmx dev stopped; see its log above (if another exchange holds $addr or $data: $own)" >&2; exit 1; }
	if curl -sf -o /dev/null "$base/readyz" && kill -0 "$pmx" 2>/dev/null; then
		ready=1
		break
	fi
	sleep 0.25
done
[ -n "$ready" ] || { echo "demo: pmx dev did not answer on $base within a minute" >&2; exit 1; }

admin=${PMX_ADMIN_TOKEN:-$(cat "$data/admin-token")}
account() {
	curl -sf -X POST -H "Authorization: Bearer $admin" "$base/admin/v1/accounts" -d "{\"name\": \"$1-$RANDOM$RANDOM\"}" |
		sed 's/.*"apiKey":"\([^"]*\)".*/\1/'
}
# The maker's order group is sized to the demo's flow, so that it stops the maker only if its
# quotes go wrong. Three noise traders at 2 orders a second, each of 1 to 5 shares reaching up to 4
# cents past the last price, fill by estimate about 60% of their orders against the 4-cent spread:
# some 11 shares a second, 110 in the group's 10 s window, about the maker's default of 100, which
# triggered and paused the maker for 10 s at a time. 500 is beyond what they can fill in 10 s
# short of a burst of 100 orders where 60 are expected. (An estimate: TestDemo's 30 s did not see
# the default of 100 trigger either.)
PMX_API_KEY=$(account demo-maker) "$bin/marketmaker" -api "$base/api/v1" -group-fills 500 &
bots+=($!)
for i in 1 2 3; do
	PMX_API_KEY=$(account "demo-noise$i") "$bin/noisetrader" -api "$base/api/v1" -rate 2 &
	bots+=($!)
done
echo
echo "The demo is running: a market maker and three noise traders on the first open market."
echo "  Markets: $base/markets   (open the live one)"
echo "  Press Ctrl-C to stop."
wait "$pmx"
