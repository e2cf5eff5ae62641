# Sourced by the scripts that take a list of figures on the device machine in one call
# (issue17.sh, issue53.sh): the setup they share, and step, ceiling and note. The script sets name
# (its results: $out/$name.tar, and a copy of the steps as $out/steps.txt) and budget (seconds,
# past which a step is skipped) before sourcing this. ONLY, a list of step names separated by
# spaces, takes those steps and skips the others without a word (to retake some figures).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runner=${PMXBENCH_RUN:-$root/bin/devbench/run}
out=${OUT:-$root/devbench-out}
work=$(mktemp -d) # every file of the results, packed into $out/$name.tar after each step
trap 'rm -rf "$work"' EXIT
k8s=${K8S_ASSETS:-${PMXBENCH_DIR:-/opt/pmxbench}/k8s} # where bin/devbench/run unpacks the pack's k8s/
started=$SECONDS

# usage prints the script's opening comment.
usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
	exit 2
}

# note adds a line to steps.txt and brings $out up to date: the device gives back at most 8
# files, and what is there if the call is cut short.
note() {
	echo "$1" | tee -a "$work/steps.txt"
	cp "$work/steps.txt" "$out/steps.txt"
	tar -C "$work" -cf "$out/$name.tar.part" . && mv "$out/$name.tar.part" "$out/$name.tar"
}

# machine records what the figures were taken on, in machine.txt.
machine() {
	{
		echo "date: $(date -u +%FT%TZ)"
		echo "cores: $(nproc)"
		grep -m1 'model name' /proc/cpuinfo || true
		grep MemTotal /proc/meminfo || true
		uname -r
	} | tee "$work/machine.txt"
}

# unpack checks the runner and unpacks the pack, once.
unpack() {
	[ -x "$runner" ] || { echo "no runner at $runner: run make devbench here, then carry bin/devbench" >&2; exit 1; }
	mkdir -p "$out"
	local t0=$SECONDS
	bash "$runner" true
	echo "pack unpacked in $((SECONDS - t0))s"
}

# wanted NAME: whether ONLY is unset or names the step.
wanted() {
	[ -z "${ONLY:-}" ] && return 0
	case " $ONLY " in *" $1 "*) return 0 ;; esac
	return 1
}

# step NAME ARGS...: runs pmxtools ARGS through the pack's runner (which may be prefixed by taskset:
# TASKSET=0-7), its table on stdout and in NAME.txt, its JSON in NAME.json. pmxtools bench starts
# the pmx beside it in the pack. A failed step is logged and the next one runs.
step() {
	local label=$1
	shift
	wanted "$label" || return 0
	local elapsed=$((SECONDS - started))
	if [ "$elapsed" -ge "$budget" ]; then
		note "$label: skipped, ${elapsed}s of the ${budget}s budget spent"
		return 0
	fi
	local pin=()
	[ -n "${TASKSET:-}" ] && pin=(taskset -c "$TASKSET")
	echo "== $label: ${pin[*]} pmxtools $*"
	local t0=$SECONDS rc=0
	bash "$runner" "${pin[@]}" pmxtools "$@" --json-file "$work/$label.json" >"$work/$label.txt" 2>&1 || rc=$?
	# The command and the table's rows (the file has the progress and the legend of the columns too).
	awk '/^command / { print } /^(load  |gap  |  requests\/s)/ { rows = 1 } /^$/ { rows = 0 } rows' "$work/$label.txt"
	[ "$rc" = 0 ] || tail -n 5 "$work/$label.txt"
	note "$label: rc=$rc, $((SECONDS - t0))s $(summary "$work/$label.txt")"
}

# summary FILE: the bench's result line, its row-lock waits, the three activities of Postgres's
# backends it saw most of (running, a wait event such as IO:WALSync) and the p99s pmx timed itself
# (its batches', its placements'), from a step's table.
summary() {
	{
		grep -E '^(closed loop|open [0-9,.]+/s)' "$1" | tr -s ' ' | head -1
		grep -m1 -oE '[0-9.]+ backends waiting on row locks' "$1"
		grep -m1 '^backends, run 1: ' "$1" | sed 's/^.*per sample: //' | cut -d, -f1-3 | sed 's/^/(backends: /; s/$/)/'
		grep -m1 '^server, run 1: ' "$1" | sed 's/^server, run 1: /(server: /; s/$/)/'
		grep -m1 '^warm-up, run 1: ' "$1" | sed 's/^warm-up, run 1: /(warm-up: /; s/$/)/'
	} 2>/dev/null | paste -sd ' ' - || true
}

# ceiling NAME DURATION BOTS MARKETS: PAIRS benches at once (default nproc/2), bench i pinned to
# cores 2i and 2i+1, each table and JSON as NAME-i.txt and NAME-i.json, and the sum of their
# orders/s in steps.txt: what the whole machine makes when nothing is shared. CEILING_WARMUP, when
# set, is each bench's --warmup.
ceiling() {
	local label=$1 dur=$2 bots=$3 markets=$4
	wanted "$label" || return 0
	local elapsed=$((SECONDS - started))
	if [ "$elapsed" -ge "$budget" ]; then
		note "$label: skipped, ${elapsed}s of the ${budget}s budget spent"
		return 0
	fi
	local pairs=${PAIRS:-$(($(nproc) / 2))} i t0=$SECONDS pids=() rc=0
	echo "== $label: $pairs independent pmxtools bench, two cores each"
	for ((i = 0; i < pairs; i++)); do
		bash "$runner" taskset -c "$((2 * i)),$((2 * i + 1))" pmxtools bench --duration "$dur" \
			--bots "$bots" --markets "$markets" ${CEILING_WARMUP:+--warmup "$CEILING_WARMUP"} \
			--json-file "$work/$label-$i.json" >"$work/$label-$i.txt" 2>&1 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=$?; done
	note "$label: rc=$rc, $((SECONDS - t0))s, $pairs pairs, sum $(sum_orders "$work/$label"-*.txt) orders/s"
}

# sum_orders FILE...: the sum of the benches' orders/s, each file's closed-loop row of its table
# counted once ("?" when a file has none: a bench that failed). Not from the JSON: every run's
# figures appear there twice, in the run and again in its loadgen report, and a sum of every
# "ordersPerSec" in it counted each bench twice (the ceilings of the first three 16-core sittings
# were double what their pairs made; docs/performance.md, "The ceiling counted twice").
sum_orders() {
	local f v sum=0
	for f in "$@"; do
		v=$(awk '/^closed loop / { gsub(",", "", $3); print $3; exit }' "$f" 2>/dev/null)
		[ -n "$v" ] || { echo "?"; return 0; }
		sum=$(awk -v a="$sum" -v b="$v" 'BEGIN { printf "%.1f", a + b }')
	done
	awk -v s="$sum" 'BEGIN { printf "%.0f\n", s }'
}
