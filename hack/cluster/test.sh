#!/usr/bin/env bash
# `make test-cluster`: bring up the one-node cluster (cluster.sh up), run internal/clustertest's
# TestCluster on it — the chart installed with the local images, the samples scheduled, the
# contract suite through the API Service, a shard pod deleted by force, the sample Event traded,
# converted, failed over and resolved, the pmx pods drained through the Eviction API and a
# rolling upgrade under load, a resolution patched with kubectl, an uninstall — then take the
# cluster down, also after a failure, and check that the machine is
# as it was before (cluster.sh fingerprint).
# GO_TEST_FLAGS adds flags to go test (e.g. -run 'TestCluster/Suite').
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$(realpath -m "${CLUSTER_DIR:-bin/.cluster}")
export CLUSTER_DIR=$dir
: "${HELM:?HELM must name the helm binary (make test-cluster sets it)}"

before=$(mktemp)
after=$(mktemp)
trap 'rm -f "$before" "$after"' EXIT
hack/cluster/cluster.sh fingerprint >"$before"

status=0
started=$SECONDS
hack/cluster/cluster.sh up || status=$?
up=$((SECONDS - started))
if [ "$status" -eq 0 ]; then
	echo "test-cluster: the cluster was up in ${up}s"
	PMX_TEST_CLUSTER=$dir PMX_TEST_HELM=$(realpath "$HELM") \
		go test -count=1 -timeout 30m -v ${GO_TEST_FLAGS:-} ./internal/clustertest || status=$?
	[ "$status" -eq 0 ] || hack/cluster/cluster.sh report || true
fi
hack/cluster/cluster.sh down
hack/cluster/cluster.sh fingerprint >"$after"
if ! diff -u "$before" "$after"; then
	echo "test-cluster: cluster.sh down left the machine changed (the diff above: - before up, + after down)" >&2
	exit 1
fi
echo "test-cluster: the machine is as it was before the cluster"
exit "$status"
