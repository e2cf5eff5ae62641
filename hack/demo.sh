#!/usr/bin/env bash
# `make demo`: the exchange (pmx dev, on its private Postgres under DEMO_DATA_DIR), the example
# market maker (examples/marketmaker) quoting the first open market, and three noise traders
# (examples/noisetrader) trading against it, so that a market page shows a live market within a
# minute. Ctrl-C stops them all: the bots first (the market maker cancels its quotes), then pmx.
#
# BIN holds pmx, marketmaker and noisetrader (default bin); DEMO_ADDR and DEMO_METRICS_ADDR are
# pmx dev's --addr and --metrics-addr (default 127.0.0.1:8080 and 127.0.0.1:9090); DEMO_PMX_FLAGS
# adds to its flags (e.g. --database-url); PMX_ADMIN_TOKEN, when set, is its admin token.
set -euo pipefail
# Each job in a process group of its own: Ctrl-C reaches this script alone, which stops the bots
# before pmx, so that the market maker can still cancel its quotes.
set -m
bin=${BIN:-bin}
addr=${DEMO_ADDR:-127.0.0.1:8080}
metrics=${DEMO_METRICS_ADDR:-127.0.0.1:9090}
data=${DEMO_DATA_DIR:-.pmx}
base="http://$addr"

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
for _ in $(seq 1 240); do
	curl -sf -o /dev/null "$base/readyz" && break
	kill -0 "$pmx" 2>/dev/null || { echo "demo: pmx dev stopped; see its log above" >&2; exit 1; }
	sleep 0.25
done
curl -sf -o /dev/null "$base/readyz" || { echo "demo: pmx dev did not answer on $base within a minute" >&2; exit 1; }

admin=${PMX_ADMIN_TOKEN:-$(cat "$data/admin-token")}
account() {
	curl -sf -X POST -H "Authorization: Bearer $admin" "$base/admin/v1/accounts" -d "{\"name\": \"$1-$RANDOM$RANDOM\"}" |
		sed 's/.*"apiKey":"\([^"]*\)".*/\1/'
}
PMX_API_KEY=$(account demo-maker) "$bin/marketmaker" -api "$base/api/v1" &
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
