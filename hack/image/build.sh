#!/usr/bin/env bash
# `make image`: build the pmx image IMG from the repository's Dockerfile where no registry can be
# reached. A private dockerd (Debian's docker.io) runs for the build only: its state under STATE
# (bin/.image/: a dot folder, which `go ... ./...` does not walk into), listening on a socket there, with no bridge and no iptables rules (the build's steps
# use the host's network, for the Go module proxy), so it changes nothing on the machine and is
# stopped at the end, also after a failure. The Dockerfile's two bases are build arguments; here
# they are local stand-ins, made once and kept in STATE:
#
#   pmx-local/golang:<go version>  the host's Go toolchain (/usr/local/go), CA certificates and a
#                                  static busybox for the shell RUN needs, as golang:1.26 has them
#   pmx-local/static:nonroot       CA certificates, tzdata and the nonroot user (65532), as
#                                  distroless/static has them
#
# The image is then saved to OUT (bin/images/<name>.tar), for `ctr images import` on a node.
# With --test it is also run: as 65532, with no shell, and pmx answers.
set -euo pipefail
cd "$(dirname "$0")/../.."
img=${IMG:-pmx:dev}
state=${STATE:-bin/.image}
out=${OUT:-bin/images}
test=false
[ "${1:-}" = --test ] && test=true

state=$(realpath -m "$state")
run=$state/run
mkdir -p "$state/data" "$run" "$out"
export DOCKER_HOST=unix://$run/docker.sock
docker=/usr/bin/docker # Debian's client; /usr/local/bin/docker may be another one, without BuildKit

dockerd_pid=
stop() {
	local status=$?
	set +e
	if [ -n "$dockerd_pid" ]; then
		kill "$dockerd_pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$dockerd_pid" 2>/dev/null || true
	fi
	# What dockerd mounts under its state it unmounts on a clean stop; make sure of it.
	grep -o " $state/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$run"
	[ "$status" -eq 0 ] || echo "image: failed (exit $status); dockerd's log is $state/dockerd.log" >&2
	exit "$status"
}
trap stop EXIT

/usr/sbin/dockerd --data-root "$state/data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" -H "$DOCKER_HOST" \
	--iptables=false --ip-forward=false --ip-masq=false --bridge=none >"$state/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 150); do
	$docker version >/dev/null 2>&1 && break
	kill -0 "$dockerd_pid" 2>/dev/null || { echo "image: dockerd stopped; its log:" >&2; tail -20 "$state/dockerd.log" >&2; exit 1; }
	sleep 0.2
done
$docker version >/dev/null

# The stand-ins for the bases, when missing.
goversion=$(go env GOVERSION)
# -r2: the recipe's revision, for a changed recipe to make the image again.
goimage=pmx-local/golang:${goversion#go}-r2
if ! $docker image inspect "$goimage" >/dev/null 2>&1; then
	echo "image: making $goimage from $(go env GOROOT)"
	root=$(mktemp -d "$state/root.XXXXXX")
	mkdir -p "$root/bin" "$root/usr/local" "$root/etc/ssl/certs" "$root/tmp" "$root/go" "$root/root"
	# root's home is /root, as in golang:1.26: the Go build cache (and the Dockerfile's cache
	# mount for it) is /root/.cache/go-build.
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
	cp /bin/busybox "$root/bin/busybox"
	for tool in sh env ls cat mkdir rm cp; do ln -s busybox "$root/bin/$tool"; done
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	cp -a "$(go env GOROOT)" "$root/usr/local/go"
	chmod 1777 "$root/tmp"
	tar -C "$root" -c . | $docker import --change 'ENV PATH=/go/bin:/usr/local/go/bin:/bin' \
		--change 'ENV GOPATH=/go' --change 'ENV HOME=/root' --change 'ENV GOTOOLCHAIN=local' - "$goimage" >/dev/null
	rm -rf "$root"
fi
# Stand-ins of other Go versions or recipes are of no more use.
$docker images pmx-local/golang --format '{{.Repository}}:{{.Tag}}' | { grep -vxF "$goimage" || true; } | xargs -r $docker rmi >/dev/null
baseimage=pmx-local/static:nonroot
if ! $docker image inspect "$baseimage" >/dev/null 2>&1; then
	echo "image: making $baseimage"
	root=$(mktemp -d "$state/root.XXXXXX")
	mkdir -p "$root/etc/ssl/certs" "$root/usr/share" "$root/tmp" "$root/home/nonroot"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	cp -a /usr/share/zoneinfo "$root/usr/share/"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
	chmod 1777 "$root/tmp"
	chown 65532:65532 "$root/home/nonroot"
	tar -C "$root" -c . | $docker import - "$baseimage" >/dev/null
	rm -rf "$root"
fi

echo "image: building $img from Dockerfile (GO_IMAGE=$goimage BASE_IMAGE=$baseimage)"
DOCKER_BUILDKIT=1 $docker build --network host --build-arg GO_IMAGE="$goimage" --build-arg BASE_IMAGE="$baseimage" \
	--progress plain -t "$img" . 2>&1 | grep -E '^#[0-9]+ (\[|DONE|ERROR|CACHED)|error' || true
$docker image inspect "$img" >/dev/null || { echo "image: the build of $img failed: run DOCKER_HOST=... docker build to see why" >&2; exit 1; }
tarball=$out/$(echo "$img" | tr ':/' '--').tar
$docker save -o "$tarball" "$img"
echo "image: $img ($($docker image inspect "$img" --format '{{.Size}}') bytes) saved to $tarball"

if $test; then
	fail() { echo "image test: $*" >&2; exit 1; }
	user=$($docker image inspect "$img" --format '{{.Config.User}}')
	[ "$user" = 65532:65532 ] || fail "$img runs as '$user', want 65532:65532 (non-root)"
	[ "$($docker run --rm --network none --entrypoint /pmx "$img" --help | sed -n 1p)" = \
		"pmx is an open exchange for YES/NO prediction markets" ] || fail "pmx --help did not answer in $img"
	[ "$($docker run --rm --network none --read-only --tmpfs /tmp "$img" migrate --help | sed -n 1p)" = \
		"Bring a database's schema up to date with this binary" ] || fail "pmx migrate --help did not answer on a read-only root with a writable /tmp"
	if $docker run --rm --network none --entrypoint /bin/sh "$img" -c true >/dev/null 2>&1; then
		fail "$img has a shell: its base should be the static one"
	fi
	echo "image test: $img runs pmx as 65532 on a read-only root (with a writable /tmp), with no shell"
fi
