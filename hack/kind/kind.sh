#!/usr/bin/env bash
# kind on a machine that reaches no image registry, for `make kind`, `make kind-down` and
# `make test-kind` (docs/kubernetes.md, "kind without a registry"). Nothing is pulled:
#
#   kind itself            built from its Go module (hack/kind/go.mod pins it) into bin/kind/bin/
#   a Docker engine        the one DOCKER_HOST (or /var/run/docker.sock) answers on; where none
#                          answers, a dockerd of its own (Debian's docker.io), its state under DIR
#                          (default bin/kind/), listening on DIR/run/docker.sock
#   the node image         pmx-local/kind-node:<kubernetes version>, made as `kind build node-image`
#                          makes one (see node_image below) but from local parts: kind's base image
#                          from Debian's packages (mmdebstrap) and the files kind's own base image
#                          adds (images/base/files of the pinned kind module), the kubeadm, kubelet
#                          and kubectl of `make cluster-bins`, and the control plane's images made
#                          here from its binaries (kube-apiserver, kube-controller-manager,
#                          kube-scheduler, kube-proxy, etcd, CoreDNS, pause), with the storage
#                          provisioner kind installs (local-path-provisioner, built from its module)
#                          and its helper
#
# Usage: kind.sh images | up | down | env | blocks | test
#
#   images  make the node image (and the engine's base images) when missing: once, then kept in
#           the engine's state.
#   up      images, then the docs' cluster: `kind create cluster` with the node image and
#           hack/kind/cluster.yaml. The private dockerd, when there is one, keeps running for the
#           cluster: `kind.sh env` prints the DOCKER_HOST that reaches it.
#   down    delete the cluster, stop the private dockerd and undo what it changed (its network's
#           bridge, its mounts, the machine's sysctls a node's kubelet set), also after a failed up.
#   env     print the shell's settings for the docs' commands: DOCKER_HOST, KUBECONFIG, PATH.
#   blocks  print the blocks of docs/kubernetes.md that test runs.
#   test    from a machine without its engine, run the commands of docs/kubernetes.md's blocks
#           marked <!-- test: kind --> (see test_docs), then down; the machine is compared before
#           and after.
#
# The private dockerd has no default bridge (--bridge=none) and writes no iptables rules
# (--iptables=false, --ip-masq=false, --ip-forward=false), so that it leaves the machine's
# firewall (and `make test-cluster`'s rules beside it) as they are: kind's network is one bridge
# (br-<id>) between this machine and the node, which `down` removes, and the API server's port is
# published on 127.0.0.1 through docker-proxy. Where root here lacks CAP_SYS_RESOURCE (some
# container sandboxes), runc cannot start a --privileged container, as every kind node is ("unable
# to apply caps: operation not permitted"): the private dockerd then runs its containers through
# runc-nosysresource, a wrapper that drops that one capability from the container's configuration,
# and hack/kind/cluster.yaml has the node's containerd restrict pods' oom_score_adj for the same
# reason.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=$(realpath -m "${KIND_DIR:-bin/kind}")
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' hack/k8s/go.mod)
bins=$(realpath -m "${K8S_BINS:-bin/k8s/$k8s_version}")
kind_version=$(awk '$1 == "sigs.k8s.io/kind" && $2 ~ /^v/ { print $2 }' hack/kind/go.mod)
lpp_version=$(awk '$1 == "github.com/rancher/local-path-provisioner" && $2 ~ /^v/ { print $2 }' hack/kind/go.mod)
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' hack/etcd/go.mod)
coredns_version=$(awk '$1 == "github.com/coredns/coredns" { print $2 }' hack/coredns/go.mod)
kind=$dir/bin/kind-$kind_version
lpp=$dir/bin/local-path-provisioner-$lpp_version
run=$dir/run
docker=/usr/bin/docker # Debian's client
cluster=${KIND_CLUSTER_NAME:-kind}

# The images, as hack/kind/cluster.yaml and the node's containerd name them.
# -r1: the recipe's revision, for a changed recipe to make the images again.
recipe=r1
base_image=pmx-local/kind-base:bookworm-$recipe
node_image=pmx-local/kind-node:$k8s_version
pause_image=pmx-local/pause:1
lpp_image=pmx-local/local-path-provisioner:$lpp_version
helper_image=pmx-local/local-path-helper:1
etcd_image=registry.k8s.io/etcd:${etcd_version#v}-0
coredns_image=registry.k8s.io/coredns/coredns:$coredns_version

log() { echo "kind: $*" >&2; }
die() { log "$*"; exit 1; }

# engine: use the Docker engine that answers, or start the private dockerd. Exports DOCKER_HOST.
engine() {
	if [ -S "$run/docker.sock" ] && DOCKER_HOST=unix://$run/docker.sock $docker version >/dev/null 2>&1; then
		export DOCKER_HOST=unix://$run/docker.sock
		return
	fi
	if [ -z "${KIND_PRIVATE_DOCKERD:-}" ] && $docker version >/dev/null 2>&1; then
		log "using the Docker engine at ${DOCKER_HOST:-unix:///var/run/docker.sock}"
		return
	fi
	[ -x /usr/sbin/dockerd ] || die "no Docker engine answers and /usr/sbin/dockerd is missing (make kind-deps installs docker.io)"
	mkdir -p "$dir/docker" "$run"
	local flags=(--data-root "$dir/docker" --exec-root "$run/exec" --pidfile "$run/dockerd.pid"
		-H "unix://$run/docker.sock" --bridge=none --iptables=false --ip-masq=false --ip-forward=false)
	# CAP_SYS_RESOURCE is bit 24 of the bounding set.
	if (( (0x$(awk '$1 == "CapBnd:" { print $2 }' /proc/self/status) >> 24 & 1) == 0 )); then
		log "this machine's root lacks CAP_SYS_RESOURCE: privileged containers run through $run/runc-nosysresource"
		cat >"$run/runc-nosysresource" <<'EOF'
#!/bin/sh
# runc, less CAP_SYS_RESOURCE in what it is asked to start (the bundle's config.json, or exec's
# --process file): root here does not hold that capability, and runc fails to grant it.
drop='with_entries(.value |= map(select(. != "CAP_SYS_RESOURCE")))'
prev=
for a in "$@"; do
	f=
	case $prev in
	--bundle | -b) f=$a/config.json filter=".process.capabilities |= ($drop)" ;;
	--process | -p) f=$a filter=".capabilities |= ($drop)" ;;
	esac
	if [ -n "$f" ] && [ -f "$f" ]; then
		jq "$filter" "$f" >"$f.pmx" && mv "$f.pmx" "$f"
	fi
	prev=$a
done
exec runc "$@"
EOF
		chmod +x "$run/runc-nosysresource"
		flags+=(--add-runtime "runc-nosysresource=$run/runc-nosysresource" --default-runtime runc-nosysresource)
	fi
	save_sysctls
	log "starting a dockerd of its own (state in $dir/docker, log in $dir/dockerd.log)"
	/usr/sbin/dockerd "${flags[@]}" >"$dir/dockerd.log" 2>&1 &
	echo $! >"$run/dockerd.mine"
	export DOCKER_HOST=unix://$run/docker.sock
	for _ in $(seq 1 150); do
		$docker version >/dev/null 2>&1 && return
		kill -0 "$(cat "$run/dockerd.mine")" 2>/dev/null || { tail -20 "$dir/dockerd.log" >&2; die "dockerd stopped"; }
		sleep 0.2
	done
	die "dockerd did not answer in 30 s; its log is $dir/dockerd.log"
}

# The sysctls that are the machine's, not the node's network namespace's, and that a kind node's
# kubelet sets (it is privileged: its /proc/sys is the machine's), with those a node's network
# settings touch: saved when kind.sh starts its engine, written back by down. (kernel.panic, for
# one, is 1 on this machine's kernel command line and 10 after a kind node started.)
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
	kernel.keys.root_maxbytes net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables
	net.bridge.bridge-nf-call-ip6tables net.ipv4.conf.all.route_localnet)

save_sysctls() {
	[ -f "$dir/sysctls.saved" ] && return
	local s v
	for s in "${sysctls[@]}"; do
		v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v"
	done >"$dir/sysctls.saved"
}

restore_sysctls() {
	[ -f "$dir/sysctls.saved" ] || return 0
	local kv
	while IFS= read -r kv; do
		[ "$(sysctl -n "${kv%%=*}" 2>/dev/null)" = "${kv#*=}" ] || sysctl -q -w "$kv" >/dev/null
	done <"$dir/sysctls.saved"
	rm -f "$dir/sysctls.saved"
}

has_image() { $docker image inspect "$1" >/dev/null 2>&1; }

# scratch_image NAME ENTRYPOINT FILE...: an image of the static binaries FILE... under
# /usr/local/bin (with ENTRYPOINT as given, a JSON array, or none), as the release's images hold
# kube-apiserver and its peers: kubeadm's static pods run them by name, from PATH.
scratch_image() {
	local name=$1 entrypoint=$2 root
	shift 2
	root=$(mktemp -d "$dir/root.XXXXXX")
	mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/etc"
	chmod 1777 "$root/tmp"
	cp "$@" "$root/usr/local/bin/"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$root/etc/passwd"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/" 2>/dev/null || true
	local changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin')
	[ -n "$entrypoint" ] && changes+=(--change "ENTRYPOINT $entrypoint")
	tar -C "$root" -c . | $docker import "${changes[@]}" - "$name" >/dev/null
	rm -rf "$root"
}

# base: kind's base image (images/base/Dockerfile of the pinned kind), from Debian's packages
# where kind builds containerd, runc, crictl and the CNI plugins from source: Debian 12's
# containerd 1.6, runc 1.1 and CNI plugins 1.1 (no crictl, which neither kind nor kubeadm runs).
base() {
	has_image "$base_image" && return
	local kinddir ctx mirror
	kinddir=$(cd hack/kind && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
	ctx=$(mktemp -d "$dir/base.XXXXXX")
	cp -r "$kinddir/images/base/files" "$ctx/files"
	chmod -R u+w "$ctx/files"
	log "making $base_image: a Debian 12 root with mmdebstrap (about two minutes), and kind $kind_version's node files"
	mirror=http://deb.debian.org/debian
	[ -f /etc/apt/sources.list.d/debian.sources ] && mirror=/etc/apt/sources.list.d/debian.sources
	mmdebstrap --quiet --variant=apt --format=tar \
		--include=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins \
		--customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*' \
		bookworm - "$mirror" | $docker import - "$base_image-root" >/dev/null
	# As kind's Dockerfile does: its files, the systemd units it wants and no others, the runtime
	# spec with its hook, a fixed sandbox image (the local pause), the CNI plugins under
	# /opt/cni/bin, containerd where its unit runs it.
	DOCKER_BUILDKIT=1 $docker build --quiet --network none -t "$base_image" -f - "$ctx" >/dev/null <<DOCKERFILE
FROM $base_image-root
COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/etc/ /etc/
RUN set -e; chmod 0755 /usr/local/bin/* /kind /kind/bin /kind/bin/*; \
	ln -sf /usr/bin/containerd /usr/local/bin/containerd; \
	mkdir -p /opt/cni/bin /etc/kubernetes/manifests; \
	for p in host-local loopback ptp portmap bridge; do cp /usr/lib/cni/\$p /opt/cni/bin/; done; \
	ctr oci spec | jq '.hooks.createContainer += [{"path": "/kind/bin/mount-product-files.sh"}] | del(.process.rlimits)' >/etc/containerd/cri-base.json; \
	sed -i 's|sandbox_image = .*|sandbox_image = "$pause_image"|' /etc/containerd/config.toml; \
	grep -q 'sandbox_image = "$pause_image"' /etc/containerd/config.toml; \
	find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete; \
	rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
		/lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
		/lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*; \
	echo ReadKMsg=no >>/etc/systemd/journald.conf; \
	ln -sf /usr/lib/systemd/systemd /sbin/init; \
	systemctl enable kubelet.service containerd.service undo-mount-hacks.service; \
	systemctl mask systemd-binfmt.service
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
DOCKERFILE
	$docker rmi "$base_image-root" >/dev/null
	rm -rf "$ctx"
}

# node_image: what `kind build node-image` does (pkg/build/nodeimage of the pinned kind) with local
# parts: in a container of the base image, kubeadm, kubelet and kubectl in /usr/bin, the version
# in /kind/version, the default StorageClass's manifest in /kind/manifests (kind's own, with its
# two images local), every image the cluster runs imported into the node's containerd (pinned, not
# unpacked), then committed with the base's entrypoint. It differs in one thing: kind's default CNI,
# kindnetd, cannot be built here (its source is not on the Go module proxy), so the image carries
# a static CNI configuration instead (ptp and host-local for the node's pod range, portmap), which
# serves a one-node cluster, and hack/kind/cluster.yaml turns the default CNI off.
node_image() {
	has_image "$node_image" && return
	base
	local kinddir images=() c
	kinddir=$(cd hack/kind && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
	log "making the control plane's images from $bins"
	for b in kube-apiserver kube-controller-manager kube-scheduler; do
		scratch_image "registry.k8s.io/$b:$k8s_version" "" "$bins/$b"
		images+=("registry.k8s.io/$b:$k8s_version")
	done
	# kube-proxy runs iptables: the base's Debian root has it.
	local ctx
	ctx=$(mktemp -d "$dir/proxy.XXXXXX")
	cp "$bins/kube-proxy" "$ctx/"
	DOCKER_BUILDKIT=1 $docker build --quiet --network none -t "registry.k8s.io/kube-proxy:$k8s_version" -f - "$ctx" >/dev/null <<DOCKERFILE
FROM $base_image
COPY kube-proxy /usr/local/bin/kube-proxy
ENTRYPOINT []
STOPSIGNAL SIGTERM
DOCKERFILE
	rm -rf "$ctx"
	images+=("registry.k8s.io/kube-proxy:$k8s_version")
	scratch_image "$etcd_image" "" "$bins/etcd"
	images+=("$etcd_image")
	# CoreDNS's Deployment (kubeadm's) gives only args: the image's entrypoint is /coredns.
	local root
	root=$(mktemp -d "$dir/root.XXXXXX")
	cp "$bins/coredns" "$root/coredns"
	tar -C "$root" -c . | $docker import --change 'ENTRYPOINT ["/coredns"]' - "$coredns_image" >/dev/null
	rm -rf "$root"
	images+=("$coredns_image")
	root=$(mktemp -d "$dir/root.XXXXXX")
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$root/pause" ./hack/image/pause
	tar -C "$root" -c . | $docker import --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' - "$pause_image" >/dev/null
	rm -rf "$root"
	images+=("$pause_image")
	root=$(mktemp -d "$dir/lpp.XXXXXX")
	cp "$lpp" "$root/local-path-provisioner"
	scratch_image "$lpp_image" '["/usr/local/bin/local-path-provisioner"]' "$root/local-path-provisioner"
	rm -rf "$root"
	images+=("$lpp_image")
	# The provisioner's helper pod runs sh with mkdir, rm, chmod: a static busybox.
	root=$(mktemp -d "$dir/root.XXXXXX")
	mkdir -p "$root/bin"
	cp /bin/busybox "$root/bin/busybox"
	for tool in sh mkdir rm rmdir chmod ls cat; do ln -s busybox "$root/bin/$tool"; done
	tar -C "$root" -c . | $docker import --change 'ENV PATH=/bin' - "$helper_image" >/dev/null
	rm -rf "$root"
	images+=("$helper_image")

	log "making $node_image (as kind $kind_version's build node-image does)"
	c=$($docker run -d --entrypoint sleep --security-opt seccomp=unconfined "$base_image" infinity)
	build_container=$c
	for b in kubeadm kubelet kubectl; do $docker cp "$bins/$b" "$c:/usr/bin/$b"; done
	$docker exec "$c" chown root:root /usr/bin/kubeadm /usr/bin/kubelet /usr/bin/kubectl
	echo "$k8s_version" | $docker exec -i "$c" sh -c 'mkdir -p /kind/manifests && cat >/kind/version'
	(cd hack/kind && go run ./storagemanifest "$kinddir" "$lpp_image" "$helper_image") |
		$docker exec -i "$c" sh -c 'cat >/kind/manifests/default-storage.yaml'
	# In place of kindnetd (see above): the node's pod range is the first /24 of kind's default
	# pod subnet, 10.244.0.0/16, which the controller-manager gives the first node.
	$docker exec -i "$c" sh -c 'mkdir -p /etc/cni/net.d && cat >/etc/cni/net.d/10-pmx-ptp.conflist' <<'EOF'
{
  "cniVersion": "1.0.0",
  "name": "kind",
  "plugins": [
    {"type": "ptp", "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	$docker exec "$c" bash -c 'nohup containerd >/tmp/containerd.log 2>&1 &
		for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done
		cat /tmp/containerd.log; exit 1'
	$docker save "${images[@]}" |
		$docker exec -i "$c" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
	$docker exec "$c" ctr --namespace=k8s.io images list -q | sort >"$dir/node-images.txt"
	# (sleep, the container's first process, reaps no child: a stopped containerd stays a zombie.)
	$docker exec "$c" bash -c 'pkill containerd; for i in $(seq 1 50); do ps -C containerd -o stat= | grep -qv Z || exit 0; sleep 0.2; done; exit 1'
	$docker exec "$c" rm -f /tmp/containerd.log
	$docker commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' "$c" "$node_image" >/dev/null
	$docker rm -f -v "$c" >/dev/null
	build_container=
	for i in "${images[@]}"; do $docker rmi "$i" >/dev/null; done
	$docker image prune --force >/dev/null
	log "$node_image holds: $(grep -v -e '^import-' -e '^sha256:' "$dir/node-images.txt" | tr '\n' ' ')"
}

images() {
	[ -x "$kind" ] || die "$kind is missing (make kind builds it)"
	[ -x "$lpp" ] || die "$lpp is missing (make kind builds it)"
	for b in kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns; do
		[ -x "$bins/$b" ] || die "$bins/$b is missing (make cluster-bins builds it)"
	done
	engine
	node_image
}

# path: the folder put first on PATH for the docs' commands: kind, kubectl and helm by their
# plain names, and Debian's docker client.
path() {
	mkdir -p "$dir/path"
	ln -sf "$kind" "$dir/path/kind"
	ln -sf "$bins/kubectl" "$dir/path/kubectl"
	ln -sf "$(realpath -m "${HELM:-bin/helm-$(awk '$1 == "HELM_VERSION" { print $3 }' Makefile)}")" "$dir/path/helm"
	ln -sf "$docker" "$dir/path/docker"
}

up() {
	images
	path
	export PATH=$dir/path:$PATH
	if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		log "cluster $cluster is up already"
	else
		KUBECONFIG=$dir/kubeconfig kind create cluster --name "$cluster" --image "$node_image" --config hack/kind/cluster.yaml
	fi
	print_env
}

# print_env: the shell's settings for the docs' commands (eval "$(hack/kind/kind.sh env)"): the
# private dockerd's DOCKER_HOST when there is one, the cluster's kubeconfig (kept in DIR, not in
# ~/.kube/config), and kind, kubectl, helm and docker first on PATH.
print_env() {
	path
	[ -S "$run/docker.sock" ] && echo "export DOCKER_HOST=unix://$run/docker.sock"
	echo "export KUBECONFIG=$dir/kubeconfig"
	echo "export PATH=$dir/path:\$PATH"
}

# blocks: the shell blocks of docs/kubernetes.md marked <!-- test: kind -->, one after another, each
# after a line #@block: what `make test-kind` runs (internal/doctest checks that this reads what
# its Markdown parser reads).
blocks() {
	awk '
		fence == "" && /^[ \t]*<!--[ \t]*test:[ \t]*kind[ \t]*-->[ \t]*$/ { marked = 1; next }
		fence == "" && /^[ \t]*(```|~~~)/ { fence = substr($1, 1, 3); if (marked) { inblock = 1; print "#@block" }; marked = 0; next }
		fence != "" && index($1, fence) == 1 && $0 ~ /^[ \t]*(```+|~~~+)[ \t]*$/ { fence = ""; inblock = 0; next }
		fence == "" && NF > 0 { marked = 0 }
		inblock { print }
	' docs/kubernetes.md
}

# test: the docs' no-registry commands, as a user runs them from the repository's root, on a free
# port in place of their 8080 (which a `make run` here may hold), then checks that the order
# rests in the market's book; the machine's state (hack/cluster/cluster.sh fingerprint: links,
# addresses, iptables and nftables rules, sysctls, mounts, cgroups) must be as it was before.
test_docs() {
	local script port before after
	script=$(blocks)
	[ -n "$script" ] || die "docs/kubernetes.md has no block marked <!-- test: kind -->"
	port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	for s in 'port-forward service/pmx-api 8080:80' 'PMX=http://127.0.0.1:8080'; do
		[ "$(grep -cF "$s" <<<"$script")" = 1 ] || die "the docs' kind block should say '$s' once"
	done
	script=${script/port-forward service\/pmx-api 8080:80/port-forward service\/pmx-api $port:80}
	script=${script/PMX=http:\/\/127.0.0.1:8080/PMX=http:\/\/127.0.0.1:$port}
	# From a machine without the engine kind.sh may have started (make's prerequisites build the
	# images with it): the docs' commands start it again.
	down
	before=$(mktemp) after=$(mktemp)
	hack/cluster/cluster.sh fingerprint >"$before"
	local start=$SECONDS rc=0
	# The last block deletes the cluster: the check runs before it.
	local check='curl -s -H "Authorization: Bearer $ALICE_KEY" "$PMX/api/v1/market/order-book?marketId=$MARKET" | jq -e ".orderBookYes | length > 0" >/dev/null || { echo "kind test: the order is not in the book" >&2; exit 1; }'
	script="${script%\#@block*}$check
${script##*\#@block}"
	log "running docs/kubernetes.md's kind blocks:"
	sed 's/^/    /' <<<"$script" >&2
	# Each command is printed with the seconds since the first began. The commands run in a process
	# group of their own (timeout makes one), so that what they left running when they failed (the
	# port-forward) is stopped with them.
	local pid
	timeout 30m bash -c "PS4='+ [\${SECONDS}s] '
set -euxo pipefail
$script" &
	pid=$!
	wait "$pid" || rc=$?
	kill -- "-$pid" 2>/dev/null || true
	log "the docs' commands took $((SECONDS - start)) s (exit $rc)"
	down
	hack/cluster/cluster.sh fingerprint >"$after"
	if ! diff "$before" "$after" >&2; then
		log "the machine is not as it was before (above: < before, > after)"
		rc=1
	fi
	rm -f "$before" "$after"
	return $rc
}

down() {
	set +e
	if [ -S "$run/docker.sock" ]; then
		export DOCKER_HOST=unix://$run/docker.sock
	fi
	if $docker version >/dev/null 2>&1 && [ -x "$kind" ]; then
		PATH=$dir/path:$PATH KUBECONFIG=$dir/kubeconfig "$kind" delete cluster --name "$cluster" 2>&1 | grep -v '^$' >&2
		# kind's network, which kind leaves for the next cluster: its bridge is this machine's.
		[ -f "$run/dockerd.mine" ] && $docker network rm kind >/dev/null 2>&1
	fi
	if [ -f "$run/dockerd.mine" ]; then
		local pid
		pid=$(cat "$run/dockerd.mine")
		kill "$pid" 2>/dev/null
		for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$pid" 2>/dev/null
		# What dockerd mounts under its state it unmounts on a clean stop; make sure of it.
		grep -o " $dir/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
		# The bridge of a network of this dockerd's (kind's, br-<the network's id, 12 digits>) that
		# a dockerd that died left behind: the id is in the dockerd's network store.
		local l
		for l in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '$2 ~ /^br-[0-9a-f]+$/ { print $2 }'); do
			grep -aq "${l#br-}" "$dir/docker/network/files/local-kv.db" 2>/dev/null && ip link del "$l"
		done
		rm -rf "$run"
		restore_sysctls
	fi
	set -e
}

# The container node_image builds in, removed also after a failure.
build_container=
trap '[ -z "$build_container" ] || $docker rm -f -v "$build_container" >/dev/null 2>&1' EXIT

case "${1:-}" in
images) images ;;
up) up ;;
down) down ;;
env) print_env ;;
blocks) blocks ;;
test) test_docs ;;
*) die "usage: kind.sh images | up | down | env | blocks | test" ;;
esac
