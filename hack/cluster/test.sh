#!/usr/bin/env bash
# `make test-cluster`: bring up the one-node cluster (cluster.sh up), run internal/clustertest's
# TestCluster on it — the chart installed with the local images, the samples scheduled, the
# contract suite through the API Service, a shard pod deleted by force, the sample Event traded,
# converted, failed over and resolved, the pmx pods drained through the Eviction API and a
# rolling upgrade under load, a resolution patched with kubectl, an uninstall — then take the
# cluster down, also after a failure, and check that the machine is
# as it was before (cluster.sh fingerprint).
# GO_TEST_FLAGS adds flags to go test (e.g. -run 'TestCluster/Suite').
# The tests' output goes through hack/testrecap, which keeps what each failed test printed last
# for the end of the run, below the cluster's report and teardown.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(realpath -m "${CLUSTER_DIR:-bin/.cluster}")
export CLUSTER_DIR=$dir
: "${HELM:?HELM must name the helm binary (make test-cluster sets it)}"

before=$(mktemp)
after=$(mktemp)
recap=$(mktemp) # what the failed tests printed last (hack/testrecap), printed at the very end
tools=$(mktemp -d)
trap 'rm -rf "$before" "$after" "$recap" "$tools"' EXIT
go build -o "$tools/testrecap" ./hack/testrecap
hack/cluster/cluster.sh fingerprint >"$before"

status=0
started=$SECONDS
hack/cluster/cluster.sh up || status=$?
up=$((SECONDS - started))
if [ "$status" -eq 0 ]; then
	echo "test-cluster: the cluster was up in ${up}s"
	PMX_TEST_CLUSTER=$dir PMX_TEST_HELM=$(realpath "$HELM") \
		go test -json -count=1 -timeout 30m -v ${GO_TEST_FLAGS:-} ./internal/clustertest 2>&1 |
		"$tools/testrecap" -o "$recap" || status=$?
	[ "$status" -eq 0 ] || hack/cluster/cluster.sh report || true
fi
hack/cluster/cluster.sh down
hack/cluster/cluster.sh fingerprint >"$after"
changed=0
if diff -u "$before" "$after"; then
	echo "test-cluster: the machine is as it was before the cluster"
else
	echo "test-cluster: cluster.sh down left the machine changed (the diff above: - before up, + after down)" >&2
	changed=1
fi
if [ -s "$recap" ]; then
	echo "test-cluster: what each failed test printed last (the whole of it is above):"
	cat "$recap"
fi
[ "$changed" -eq 0 ] || exit 1
exit "$status"
