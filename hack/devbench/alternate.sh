# Sourced by the scripts that alternate pmx builds or settings on the device machine (ab.sh,
# issue39.sh, pgsettings.sh): the setup they share, note and run. The script sets name (its
# results: $out/$name.tar and $out/$name-steps.txt) and budget (seconds, past which a run is
# skipped) before sourcing this.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runner=${PMXBENCH_RUN:-$root/bin/devbench/run}
b=${PMXBENCH_DIR:-/opt/pmxbench}
out=${OUT:-$root/devbench-out}
dur=${DURATION:-15s}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

# note adds a line to the steps and brings $out up to date (the device gives back what is there
# if the call is cut short).
note() {
	echo "$1" | tee -a "$work/steps.txt"
	cp "$work/steps.txt" "$out/$name-steps.txt"
	tar -C "$work" -cf "$out/$name.tar.part" . && mv "$out/$name.tar.part" "$out/$name.tar"
}

# run STEP CORES ARGS...: one pmxtools bench on cores CORES (a taskset list) for DURATION, its
# table in STEP.txt and STEP.json, its row in the steps; skipped once the budget is spent.
run() {
	local step=$1 cores=$2
	shift 2
	if [ $((SECONDS - started)) -ge "$budget" ]; then
		note "$step: skipped, budget spent"
		return 0
	fi
	local rc=0
	bash "$runner" taskset -c "$cores" pmxtools bench --duration "$dur" "$@" \
		--json-file "$work/$step.json" >"$work/$step.txt" 2>&1 || rc=$?
	note "$step: rc=$rc $(grep -E '^(closed loop|open [0-9,.]+/s)' "$work/$step.txt" | tr -s ' ' | head -1) $(grep -E '^wal, run 1' "$work/$step.txt" || true)"
}
