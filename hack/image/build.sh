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
# Beside it, the two other images a test cluster's node needs and no registry can give here:
#
#   pmx-local/postgres:15          Debian's postgresql (a root made by mmdebstrap once, kept as
#                                  pmx-local/debian-postgresql:15) with postgres-entrypoint.sh,
#                                  run as uid 70 like the official image the chart names
#   pmx-local/pause:1              the pods' sandbox: hack/image/pause, alone
#
# The images are then saved to OUT (bin/images/<name>.tar), for `ctr images import` on a node.
# With --test they are also run: pmx as 65532 with no shell; Postgres initialized as the chart runs
# it, taking its password over TCP; pmx migrate, shard, api and operator started on that Postgres
# on a read-only root with no writable /tmp (the chart gives pmx's pods none), each until it
# serves; pause stopping with 0 on SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/../.."
img=${IMG:-pmx:dev}
state=${STATE:-bin/.image}
out=${OUT:-bin/images}
test=false
[ "${1:-}" = --test ] && test=true
# --cnpg: only the two images of CloudNativePG on the test cluster (below), not pmx's.
cnpg=false
[ "${1:-}" = --cnpg ] && cnpg=true

state=$(realpath -m "$state")
run=$state/run
mkdir -p "$state/data" "$run" "$out"
export DOCKER_HOST=unix://$run/docker.sock
docker=/usr/bin/docker # Debian's client; /usr/local/bin/docker may be another one, without BuildKit

dockerd_pid=
containers=()
stop() {
	local status=$?
	set +e
	for c in "${containers[@]}"; do $docker rm -f "$c" >/dev/null 2>&1; done
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

pgbase=pmx-local/debian-postgresql:15
if ! $docker image inspect "$pgbase" >/dev/null 2>&1; then
	echo "image: making $pgbase with mmdebstrap (Debian's postgresql-15; about two minutes)"
	mirror=http://deb.debian.org/debian
	[ -f /etc/apt/sources.list.d/debian.sources ] && mirror=/etc/apt/sources.list.d/debian.sources
	# The chart runs Postgres as uid 70, the official image's postgres user.
	mmdebstrap --quiet --variant=apt --include=postgresql-15 --format=tar \
		--customize-hook='chroot "$1" sh -c "groupmod -g 70 postgres && usermod -u 70 -g 70 postgres && chown -R 70:70 /var/lib/postgresql /var/run/postgresql /etc/postgresql"' \
		--customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
		bookworm - "$mirror" | $docker import - "$pgbase" >/dev/null
fi
pgimage=pmx-local/postgres:15
echo "image: building $pgimage"
DOCKER_BUILDKIT=1 $docker build --quiet -t "$pgimage" -f - hack/image >/dev/null <<DOCKERFILE
FROM $pgbase
COPY postgres-entrypoint.sh /usr/local/bin/pmx-postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/bin:/bin PGDATA=/var/lib/postgresql/data
USER 70:70
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/pmx-postgres-entrypoint"]
DOCKERFILE

# With --cnpg, the images CloudNativePG needs on the test cluster (`make cnpg-images`), from the
# operator's manager binary CNPG_MANAGER (`make cnpg-bins`):
#
#   pmx-local/cnpg:<version>       /manager alone on the static base: the operator runs it, and each
#                                  instance pod's init container copies it into the operand
#   pmx-local/cnpg-postgres:15     the Debian Postgres root above with its binaries on PATH (initdb,
#                                  postgres, pg_ctl, pg_controldata, pg_basebackup, pg_rewind), as
#                                  CloudNativePG's operand image requirements ask; the tag begins with
#                                  the major version, which the operator reads from it
if $cnpg; then
	: "${CNPG_MANAGER:?CNPG_MANAGER must name the manager binary of the operator (make cnpg-images sets it)}"
	: "${CNPG_VERSION:?CNPG_VERSION must name its release (make cnpg-images sets it)}"
	# As the release's image lays it out: the operator finds the architectures it can give instance
	# pods by the names operator/manager_<GOARCH> (relative to /), and runs /manager, a link to one.
	ctx=$(mktemp -d "$state/cnpg.XXXXXX")
	mkdir -p "$ctx/root/operator"
	cp "$CNPG_MANAGER" "$ctx/root/operator/manager_$(go env GOARCH)"
	ln -s "operator/manager_$(go env GOARCH)" "$ctx/root/manager"
	cnpgimage=pmx-local/cnpg:${CNPG_VERSION#v}
	echo "image: building $cnpgimage"
	DOCKER_BUILDKIT=1 $docker build --quiet -t "$cnpgimage" -f - "$ctx" >/dev/null <<DOCKERFILE
FROM $baseimage
COPY root/ /
WORKDIR /
USER 10001:10001
ENTRYPOINT ["/manager"]
DOCKERFILE
	rm -rf "$ctx"
	operandimage=pmx-local/cnpg-postgres:15
	echo "image: building $operandimage"
	# uid 26: the operand user, the default postgresUID of CloudNativePG (gid 26 is in the root already).
	DOCKER_BUILDKIT=1 $docker build --network none --quiet -t "$operandimage" -f - hack/image >/dev/null <<DOCKERFILE
FROM $pgbase
USER 0
RUN useradd -u 26 -g 26 -d /var/lib/postgresql -s /bin/sh -M cnpg
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8
USER 26:26
DOCKERFILE
	for i in "$cnpgimage" "$operandimage"; do
		tarball=$out/$(echo "$i" | tr ':/' '--').tar
		$docker save -o "$tarball" "$i"
		echo "image: $i ($($docker image inspect "$i" --format '{{.Size}}') bytes) saved to $tarball"
	done
	# The operand runs what the operator asks of it.
	for tool in initdb postgres pg_ctl pg_controldata pg_basebackup pg_rewind; do
		$docker run --rm --network none --entrypoint "$tool" "$operandimage" --version >/dev/null ||
			{ echo "image test: $operandimage has no working $tool on PATH" >&2; exit 1; }
	done
	for manager in /manager "/operator/manager_$(go env GOARCH)"; do
		$docker run --rm --network none --entrypoint "$manager" "$cnpgimage" --help >/dev/null ||
			{ echo "image test: $cnpgimage does not run $manager" >&2; exit 1; }
	done
	echo "image test: $operandimage has the binaries CloudNativePG runs; $cnpgimage runs /manager"
	exit 0
fi

pauseimage=pmx-local/pause:1
echo "image: building $pauseimage"
root=$(mktemp -d "$state/root.XXXXXX")
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$root/pause" ./hack/image/pause
tar -C "$root" -c . | $docker import --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' - "$pauseimage" >/dev/null
rm -rf "$root"

echo "image: building $img from Dockerfile (GO_IMAGE=$goimage BASE_IMAGE=$baseimage)"
DOCKER_BUILDKIT=1 $docker build --network host --build-arg GO_IMAGE="$goimage" --build-arg BASE_IMAGE="$baseimage" \
	--progress plain -t "$img" . 2>&1 | grep -E '^#[0-9]+ (\[|DONE|ERROR|CACHED)|error' || true
$docker image inspect "$img" >/dev/null || { echo "image: the build of $img failed: run DOCKER_HOST=... docker build to see why" >&2; exit 1; }
for i in "$img" "$pgimage" "$pauseimage"; do
	tarball=$out/$(echo "$i" | tr ':/' '--').tar
	$docker save -o "$tarball" "$i"
	echo "image: $i ($($docker image inspect "$i" --format '{{.Size}}') bytes) saved to $tarball"
done
# Each build leaves the one it replaced untagged, and its steps' layers in the build cache: about
# 0.5 GB a build, which filled a test machine's disk over a day of builds (and a full disk stops
# the test cluster's pods). Keep the tagged images and the Go caches the Dockerfile mounts (what
# makes the next build quick); drop the rest.
$docker image prune --force >/dev/null
$docker builder prune --force --filter type=regular >/dev/null
$docker builder prune --force --filter type=source.local >/dev/null

if $test; then
	fail() { echo "image test: $*" >&2; exit 1; }
	user=$($docker image inspect "$img" --format '{{.Config.User}}')
	[ "$user" = 65532:65532 ] || fail "$img runs as '$user', want 65532:65532 (non-root)"
	[ "$($docker run --rm --network none --entrypoint /pmx "$img" --help | sed -n 1p)" = \
		"pmx is an open exchange for YES/NO prediction markets" ] || fail "pmx --help did not answer in $img"
	if $docker run --rm --network none --entrypoint /bin/sh "$img" -c true >/dev/null 2>&1; then
		fail "$img has a shell: its base should be the static one"
	fi
	echo "image test: $img runs pmx as 65532, with no shell"

	# Postgres as the chart runs it: uid 70, a read-only root, the data below the volume's root.
	c=$($docker run -d --network none --read-only --tmpfs /tmp \
		--tmpfs /var/run/postgresql:uid=70,gid=70,mode=0775 --tmpfs /var/lib/postgresql/data:uid=70,gid=70,mode=0700 \
		-e POSTGRES_USER=pmx -e POSTGRES_DB=pmx -e POSTGRES_PASSWORD=image-test -e PGDATA=/var/lib/postgresql/data/pgdata "$pgimage")
	containers+=("$c")
	for _ in $(seq 1 300); do
		$docker exec "$c" pg_isready --quiet --host=127.0.0.1 --port=5432 --username=pmx --dbname=pmx && break
		[ "$($docker inspect "$c" --format '{{.State.Running}}')" = true ] || break
		sleep 0.2
	done
	$docker exec "$c" pg_isready --quiet --host=127.0.0.1 --port=5432 --username=pmx --dbname=pmx ||
		fail "$pgimage did not start: $($docker logs "$c" 2>&1 | tail -5)"
	[ "$($docker exec -e PGPASSWORD=image-test "$c" psql --host=127.0.0.1 --username=pmx --dbname=pmx -tAc 'select current_user')" = pmx ] ||
		fail "$pgimage refused pmx's password over TCP"
	if $docker exec -e PGPASSWORD=wrong "$c" psql --host=127.0.0.1 --username=pmx --dbname=pmx -tAc 'select 1' >/dev/null 2>&1; then
		fail "$pgimage took a wrong password"
	fi
	echo "image test: $pgimage initializes pmx's database as uid 70 on a read-only root and takes only its password"
	pg=$c

	# pmx's processes as the chart runs them (65532, a read-only root) but with no writable /tmp at
	# all, as the chart gives them none: each starts on that Postgres, in its network namespace, and
	# serves. (pmx once linked controller-runtime's envtest, whose package init makes a folder under
	# /tmp or the home folder: every process failed before main on such a root.)
	# pmx ARGS...: docker run ARGS so, less the client's warning that the namespace forwards no IPv4
	# (nothing here leaves it).
	pmx() {
		local rc=0
		$docker run --network "container:$pg" --read-only \
			-e PMX_DATABASE_URL="postgres://pmx:image-test@127.0.0.1:5432/pmx?sslmode=disable" \
			-e PMX_INTERNAL_TOKEN=image-test-internal-token-0123456789 "$@" 2>"$state/run.err" || rc=$?
		grep -v 'IPv4 forwarding is disabled' "$state/run.err" >&2 || true
		return "$rc"
	}
	log=$(pmx --rm "$img" migrate 2>&1) || fail "pmx migrate failed on a read-only root with no /tmp: $log"
	# get PORT PATH: the HTTP status of GET PATH on 127.0.0.1:PORT in that namespace, asked by the
	# Postgres image's bash, as the pmx image has no shell and no client.
	get() {
		$docker exec "$pg" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\n\r\n" "$2" >&3 && head -n 1 <&3' _ "$1" "$2" 2>/dev/null |
			awk '{ print $2 }'
	}
	# serves NAME CONTAINER PORT: waits for the process's /readyz to answer 200 (it reaches the
	# database) on PORT, failing with its log if it stops first or never does.
	serves() {
		for _ in $(seq 1 300); do
			[ "$(get "$3" /readyz)" = 200 ] && return 0
			[ "$($docker inspect "$2" --format '{{.State.Running}}')" = true ] || break
			sleep 0.2
		done
		fail "pmx $1 did not serve on a read-only root with no /tmp: $($docker logs "$2" 2>&1 | tail -5)"
	}
	c=$(pmx -d "$img" shard --name image-test --addr 127.0.0.1:8090 --metrics-addr 127.0.0.1:9092)
	containers+=("$c")
	serves shard "$c" 8090
	shard=$c
	c=$(pmx -d "$img" api --addr 127.0.0.1:8080 --metrics-addr 127.0.0.1:9093)
	containers+=("$c")
	serves api "$c" 8080
	[ "$(get 8080 /api/v1/openapi.yaml)" = 200 ] || fail "pmx api does not serve its API"
	# The operator's Kubernetes API is nowhere here: it gets as far as serving its probes.
	printf 'apiVersion: v1\nkind: Config\nclusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: none, user: {token: none}}]\ncontexts: [{name: none, context: {cluster: none, user: none}}]\ncurrent-context: none\n' >"$state/kubeconfig"
	c=$(pmx -d -v "$state/kubeconfig:/kubeconfig:ro" -e KUBECONFIG=/kubeconfig "$img" operator --leader-elect=false \
		--metrics-bind-address 127.0.0.1:9094 --health-probe-bind-address 127.0.0.1:9091)
	containers+=("$c")
	serves operator "$c" 9091
	# SIGTERM stops a shard cleanly: it hands its markets back and exits 0.
	$docker stop --time 20 "$shard" >/dev/null
	[ "$($docker inspect "$shard" --format '{{.State.ExitCode}}')" = 0 ] ||
		fail "pmx shard did not exit 0 on SIGTERM: $($docker logs "$shard" 2>&1 | tail -5)"
	echo "image test: pmx migrate, shard, api and operator start and serve as 65532 on a read-only root with no writable /tmp"

	# pause: up until SIGTERM, then exit 0.
	c=$($docker run -d --network none "$pauseimage")
	containers+=("$c")
	for _ in $(seq 1 100); do
		$docker logs "$c" 2>&1 | grep -q 'pause: waiting for SIGTERM' && break
		sleep 0.1
	done
	$docker stop --time 10 "$c" >/dev/null
	[ "$($docker inspect "$c" --format '{{.State.ExitCode}}')" = 0 ] || fail "$pauseimage did not exit 0 on SIGTERM"
	echo "image test: $pauseimage stops with 0 on SIGTERM"
fi
