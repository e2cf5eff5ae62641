#!/usr/bin/env bash
# Packs bin/devbench for one trip to a bare device machine (make devbench): the bundle of
# ../shared/devbench/pack (pmx and this machine's Postgres, unpacked there by bin/devbench/run into
# /opt/pmxbench), with kube-apiserver and etcd added under k8s/ for pmx bench --distributed and the
# engine's test binary left out, compressed harder (xz -9e) so that it and the working tree fit
# the device's carry (64 MiB) together: then the 16-core figures take one call, not two.
#
#   hack/devbench/pack.sh KUBE_ASSETS    # a folder holding kube-apiserver and etcd
set -euo pipefail
assets=${1:?usage: hack/devbench/pack.sh KUBE_ASSETS (a folder holding kube-apiserver and etcd)}
for f in kube-apiserver etcd; do
	[ -x "$assets/$f" ] || { echo "pack: no $assets/$f; make k8s-bins builds it" >&2; exit 1; }
done
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
[ -x ../shared/devbench/pack ] || { echo "pack: no ../shared/devbench/pack beside the checkout" >&2; exit 1; }
../shared/devbench/pack >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
xz -dc bin/devbench/bundle.tar.xz | tar -C "$tmp" -xf -
rm -f "$tmp/engine.test"
mkdir -p "$tmp/k8s"
cp "$assets/kube-apiserver" "$assets/etcd" "$tmp/k8s/"
echo "pack: compressing pmx, Postgres, kube-apiserver and etcd (xz -9e, a minute or two)"
tar -C "$tmp" -cf - . | xz -T0 -9e >"$tmp/bundle.tar.xz"
mv "$tmp/bundle.tar.xz" bin/devbench/bundle.tar.xz

# What travels: the working tree (tracked and untracked files git does not ignore) and the pack.
limit=$((64 * 1024 * 1024))
# (A tracked file deleted from the tree does not travel: stat skips it.)
tree=$({ git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true; } |
	awk '{ s += $1 } END { print s + 0 }')
pack=$(du -sb bin/devbench | cut -f1)
echo "pack: bin/devbench $((pack / 1024)) KiB + working tree $((tree / 1024)) KiB of the carry's $((limit / 1024)) KiB"
if [ $((pack + tree)) -gt "$limit" ]; then
	echo "pack: over the device's carry by $(((pack + tree - limit) / 1024)) KiB" >&2
	exit 1
fi
