#!/usr/bin/env bash
# A one-node Kubernetes cluster with real pods, from host processes, for `make test-cluster`
# (and `make cluster-up` / `make cluster-down` by hand). No registry, no kind, no systemd:
#
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy   bin/k8s/<version>/
#   CoreDNS (a host process serving the kube-dns Service's ClusterIP)                    bin/k8s/<version>/
#   containerd and runc (Debian), the bridge, host-local, portmap and firewall CNI plugins (Debian)
#   the images of bin/images/*.tar (`make image`), imported into containerd
#
# Usage: cluster.sh up | down | status | fingerprint
#
#   up      start the cluster, wait until its node is Ready and DNS answers; write DIR/kubeconfig.
#   down    stop every process and undo every change up made, also after a failed or killed up.
#   status  say whether a cluster is up.
#   fingerprint  print the state of the machine that up changes (see fingerprint below).
#
# Everything lives under DIR (default bin/.cluster: a dot folder, which `go ... ./...` skips):
# certificates, etcd's data, containerd's root and state (network namespaces included), the
# kubelet's root, pod logs and the IPs handed out. Outside it, up changes only what a node must:
#
#   - the bridge pmx0 with 10.244.0.1/24, the node's address: the API server, the kubelet and
#     CoreDNS listen on it, so nothing is exposed beyond this machine and no port is taken from
#     anything else (etcd, which only the API server talks to, listens on a free loopback port);
#   - the pods' veths, and iptables rules in KUBE-* and CNI-* chains (kube-proxy, the kubelet,
#     the CNI plugins), in iptables and ip6tables;
#   - the sysctls a node sets (net.ipv4.ip_forward, bridge-nf-call-*, and those the kubelet
#     tunes), saved in DIR before and written back after;
#   - the cgroup pmx-test under each cgroup v1 hierarchy, the pods' cgroup root;
#   - the shims' sockets under /run/containerd/s, libcni's cache in /var/lib/cni, the kubelet's
#     /var/lib/kubelet/device-plugins and links in /var/log/containers, whatever their settings;
#   - the nftables tables behind iptables, when there were none.
#
# down removes exactly those: the rules of KUBE-* and CNI-* chains and the chains, the tables and
# folders that were not there before, the bridge, the cgroups, every mount under DIR. It must run
# as root (as the kubelet must).
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=$(realpath -m "${CLUSTER_DIR:-bin/.cluster}")
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' hack/k8s/go.mod)
bins=$(realpath -m "${K8S_BINS:-bin/k8s/$k8s_version}")
images=$(realpath -m "${IMAGES:-bin/images}")

node=test-node
bridge=pmx0
node_ip=10.244.0.1
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
dns_ip=10.96.0.10
cgroup=pmx-test
apiserver_port=6443

run=$dir/run      # pids, sockets, network namespaces: all gone after down
pki=$dir/pki
sock=$run/containerd/containerd.sock
kubeconfig=$dir/kubeconfig

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# Folders of the machine's that some part makes, whatever its configuration (see up).
host_paths=(/run/containerd /var/lib/cni /var/lib/kubelet /var/log/containers)

# The sysctls a node changes: up saves them once, down writes them back.
sysctls=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
	net.ipv4.conf.all.route_localnet vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start NAME CMD...: run CMD in the background, its output in DIR/logs/NAME.log, its pid in
# run/NAME.pid.
start() {
	local name=$1
	shift
	"$@" >"$dir/logs/$name.log" 2>&1 &
	echo $! >"$run/$name.pid"
}

# wait_for WHAT SECONDS CMD...: poll CMD every 0.2 s until it succeeds; fail after SECONDS, or
# as soon as a process of the cluster has died.
wait_for() {
	local what=$1 seconds=$2
	shift 2
	local deadline=$((SECONDS + seconds))
	until "$@" >/dev/null 2>&1; do
		for pidfile in "$run"/*.pid; do
			local name
			name=$(basename "$pidfile" .pid)
			kill -0 "$(cat "$pidfile")" 2>/dev/null ||
				die "$name stopped while waiting for $what; the end of $dir/logs/$name.log:
$(tail -20 "$dir/logs/$name.log")"
		done
		[ "$SECONDS" -lt "$deadline" ] || die "no $what after ${seconds}s; logs in $dir/logs"
		sleep 0.2
	done
}

kubectl() { "$bins/kubectl" --kubeconfig "$kubeconfig" "$@"; }

# cert NAME CN O SAN EKU: a key and a certificate signed by the cluster's CA.
cert() {
	local name=$1 cn=$2 org=$3 san=$4 eku=$5
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$name.key" \
		-subj "/CN=$cn${org:+/O=$org}" -out "$pki/$name.csr" 2>/dev/null
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 7 \
		-out "$pki/$name.crt" -extfile <(printf 'extendedKeyUsage=%s\n%s' "$eku" "${san:+subjectAltName=$san}") 2>/dev/null
	rm "$pki/$name.csr"
}

make_pki() {
	mkdir -p "$pki"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/ca.key" \
		-out "$pki/ca.crt" -days 7 -subj /CN=pmx-test-cluster-ca 2>/dev/null
	cert apiserver kube-apiserver "" \
		"IP:$node_ip,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
		serverAuth
	# One client identity for kubectl, the tests and every component: a throwaway cluster's admin.
	cert admin pmx-test-admin system:masters "" clientAuth
	openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
	openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: pmx-test
  cluster:
    server: https://$node_ip:$apiserver_port
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: pmx-test-admin
  user:
    client-certificate-data: $(base64 -w0 "$pki/admin.crt")
    client-key-data: $(base64 -w0 "$pki/admin.key")
contexts:
- name: pmx-test
  context: {cluster: pmx-test, user: pmx-test-admin}
current-context: pmx-test
EOF
}

cgroup_dirs() { find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d -name "$cgroup" 2>/dev/null || true; }

preflight() {
	[ "$(id -u)" -eq 0 ] || die "the kubelet, containerd and the network setup need root"
	[ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ] ||
		die "this script sets up a cgroup v1 node (cgroupfs); /sys/fs/cgroup here is cgroup v2"
	for b in kube-apiserver etcd kubectl kubelet kube-scheduler kube-controller-manager kube-proxy coredns; do
		[ -x "$bins/$b" ] || die "no $bins/$b: run make cluster-bins"
	done
	for t in containerd containerd-shim-runc-v2 runc ctr iptables nft conntrack openssl curl /usr/bin/python3; do
		command -v "$t" >/dev/null || die "no $t: run make cluster-deps"
	done
	[ -x /usr/lib/cni/bridge ] || die "no CNI plugins in /usr/lib/cni: run make cluster-deps"
	ls "$images"/*.tar >/dev/null 2>&1 || die "no images in $images: run make image"
	if [ -d "$run" ]; then
		die "a cluster is up (or was not taken down) in $dir: run hack/cluster/cluster.sh down first"
	fi
	ip link show "$bridge" >/dev/null 2>&1 && die "the bridge $bridge exists: run hack/cluster/cluster.sh down first"
	if grep -qF " $dir/" /proc/mounts; then die "there are mounts under $dir: run hack/cluster/cluster.sh down first"; fi
}

up() {
	log "bringing up a one-node cluster (Kubernetes $k8s_version) in $dir"
	rm -rf "$dir"
	# A full disk shows itself late and unclearly (pods that never get Ready, and helm's timeout
	# after 5 minutes): say so now. A run of make test-cluster writes about 3 GiB under DIR.
	local free_kib
	free_kib=$(df -Pk "$(dirname "$dir")" | awk 'NR == 2 { print $4 }')
	[ "$free_kib" -ge $((4 * 1024 * 1024)) ] ||
		die "the disk holding $dir has $((free_kib / 1024)) MiB free; a test cluster needs about 4 GiB (the images, containerd's snapshots, Postgres's volumes): free some space first (go clean -cache, for one)"
	mkdir -p "$dir/logs" "$run"
	for s in "${sysctls[@]}"; do
		v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v"
	done | tr '\t' ' ' >"$dir/sysctl.before"
	# Folders that some part makes whatever its configuration: the shims' sockets go to
	# /run/containerd/s, libcni caches results in /var/lib/cni, the kubelet makes
	# /var/lib/kubelet/device-plugins and links containers' logs in /var/log/containers. down
	# removes those that up found missing; and the nftables tables (behind iptables) likewise.
	for p in "${host_paths[@]}"; do [ -e "$p" ] || echo "$p"; done >"$dir/created"
	nft list tables >"$dir/nft-tables.before" 2>/dev/null || true
	make_pki

	# The node's network: its bridge and address first, so that every component can bind to it.
	ip link add "$bridge" type bridge
	ip addr add "$node_ip/24" dev "$bridge"
	ip link set "$bridge" up
	sysctl -qw net.ipv4.ip_forward=1
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 2>/dev/null ||
		modprobe br_netfilter 2>/dev/null || true
	for d in $(find /sys/fs/cgroup -mindepth 1 -maxdepth 1 -type d); do
		mkdir -p "$d/$cgroup"
		[ -f "$d/cpuset.cpus" ] && cat "$d/cpuset.cpus" >"$d/$cgroup/cpuset.cpus" && cat "$d/cpuset.mems" >"$d/$cgroup/cpuset.mems"
	done

	etcd_port=$(free_port)
	etcd_peer_port=$(free_port)
	start etcd "$bins/etcd" --name "$node" --data-dir "$dir/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "$node=http://127.0.0.1:$etcd_peer_port" --unsafe-no-fsync --log-level warn
	start kube-apiserver "$bins/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address "$node_ip" --advertise-address "$node_ip" --secure-port "$apiserver_port" \
		--service-cluster-ip-range "$service_cidr" --authorization-mode RBAC \
		--client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
		--kubelet-preferred-address-types InternalIP,Hostname
	wait_for "kube-apiserver" 120 kubectl get --raw /readyz

	start kube-controller-manager "$bins/kube-controller-manager" --kubeconfig "$kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --use-service-account-credentials \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt"
	start kube-scheduler "$bins/kube-scheduler" --kubeconfig "$kubeconfig" --leader-elect=false \
		--bind-address 127.0.0.1 --secure-port 0

	# containerd, with every path under DIR.
	mkdir -p "$dir/cni/net.d" "$dir/cni/ipam"
	cat >"$dir/cni/net.d/10-pmx.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pmx-test",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "subnet": "$pod_cidr", "gateway": "$node_ip", "dataDir": "$dir/cni/ipam",
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "firewall"}
  ]
}
EOF
	cat >"$dir/containerd.toml" <<EOF
version = 2
root = "$dir/containerd"
state = "$run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/pmx-local/pause:1"
  # root here lacks CAP_SYS_RESOURCE: runc could not give a sandbox the kubelet's oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      Root = "$run/runc"
EOF
	start containerd containerd --config "$dir/containerd.toml"
	wait_for "containerd" 60 ctr --address "$sock" version
	for tarball in "$images"/*.tar; do
		ctr --address "$sock" -n k8s.io images import --no-unpack "$tarball" >/dev/null
	done

	mkdir -p "$dir/kubelet" "$dir/pod-logs"
	cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup
failCgroupV1: false
failSwapOn: false
clusterDNS: [$dns_ip]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $dir/pod-logs
oomScoreAdj: 0
# A test machine's disk may be fuller than a node's defaults allow: no evictions, no image GC.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
	start kubelet "$bins/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$kubeconfig" \
		--root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" --hostname-override "$node" --node-ip "$node_ip"

	cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $kubeconfig}
hostnameOverride: $node
clusterCIDR: $pod_cidr
bindAddress: $node_ip
healthzBindAddress: $node_ip:10256
metricsBindAddress: $node_ip:10249
iptables: {localhostNodePorts: false}
# Leave the machine's conntrack table and timeouts alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
	start kube-proxy "$bins/kube-proxy" --config "$dir/kube-proxy.yaml"

	# Cluster DNS: CoreDNS on the node, behind the kube-dns Service (an EndpointSlice by hand).
	cat >"$dir/Corefile" <<EOF
.:53 {
    bind $node_ip
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $kubeconfig pmx-test
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    ready $node_ip:8181
}
EOF
	start coredns "$bins/coredns" -conf "$dir/Corefile"
	wait_for "the node $node Ready" 120 kubectl wait --for=condition=Ready "node/$node" --timeout 1s
	wait_for "the default service account" 60 kubectl get serviceaccount default
	kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $dns_ip
  ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: pmx-test-cluster}
addressType: IPv4
endpoints: [{addresses: [$node_ip]}]
ports: [{name: dns, port: 53, protocol: UDP}, {name: dns-tcp, port: 53, protocol: TCP}]
EOF
	# CoreDNS is ready once its kubernetes plugin has synced with the API server.
	wait_for "CoreDNS ready" 60 curl -sf "http://$node_ip:8181/ready"
	# The node's own connections to a Service take kube-proxy's rules: the API server through the
	# kubernetes Service's address (the CA checks that it is the API server answering, not
	# whatever the machine's default route leads to).
	wait_for "the API server through the kubernetes Service (kube-proxy's rules)" 60 \
		kubectl --server "https://10.96.0.1:443" get --raw /readyz
	log "up: kubectl --kubeconfig $kubeconfig get pods -A; take it down with hack/cluster/cluster.sh down"
}

down() {
	[ "$(id -u)" -eq 0 ] || die "down needs root, as up did"
	set +e
	log "taking down the cluster in $dir"
	# The kubelet first, so that it restarts nothing; then every container, through its cgroups.
	for name in kubelet kube-proxy coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do
		stop_pid "$run/$name.pid"
	done
	local d
	for _ in 1 2 3; do
		for d in $(cgroup_dirs); do
			find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
		done
		sleep 0.2
	done
	# The shims exit once containerd has deleted their tasks; the rest are stopped by hand.
	pkill -f "containerd-shim-runc-v2 -namespace k8s.io -id [0-9a-f]* -address $sock" 2>/dev/null
	stop_pid "$run/containerd.pid"
	pkill -9 -f "containerd-shim-runc-v2 -namespace k8s.io -id [0-9a-f]* -address $sock" 2>/dev/null
	# Shim sockets whose name no longer answers.
	# (No `cmd | grep -q` in here: under pipefail, grep's early exit can fail cmd with SIGPIPE.)
	local listening
	listening=$(ss -xl 2>/dev/null)
	for s in /run/containerd/s/*; do
		[ -S "$s" ] || continue
		[[ $listening == *"$s"* ]] || rm -f "$s"
	done
	# Mounts: pods' volumes, containers' roots, network namespaces (deepest first).
	grep -o " $dir/[^ ]*" /proc/mounts | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	for d in $(cgroup_dirs); do
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	# The network: the pods' veths, then the bridge and every KUBE-/CNI- rule. A veth would go with
	# its pod's namespace, but the kernel frees that later, after its last user (a lazy unmount's):
	# one was seen still there when test.sh took the fingerprint. Deleting the bridge's ports
	# deletes each pair at once.
	local port
	for port in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{ print $2 }'); do
		ip link del "${port%%@*}" 2>/dev/null
	done
	ip link del "$bridge" 2>/dev/null
	for ipt in iptables ip6tables; do
		command -v "$ipt-save" >/dev/null || continue
		local rules
		rules=$("$ipt-save")
		if [[ $rules =~ (KUBE|CNI)- ]]; then
			echo "$rules" | awk '
				/^[*]/ { print; next }
				/^:(KUBE|CNI)-/ { next }
				/^-A / && /(KUBE|CNI)-/ { next }
				{ print }' | "$ipt-restore"
		fi
	done
	if [ -f "$dir/sysctl.before" ]; then
		while IFS== read -r k v; do sysctl -qw "$k=$v" 2>/dev/null; done <"$dir/sysctl.before"
	fi
	# Tables that up found missing and that are empty again.
	if [ -f "$dir/nft-tables.before" ]; then
		nft list tables 2>/dev/null | while read -r _ family table; do
			grep -qxF "table $family $table" "$dir/nft-tables.before" && continue
			case $family in ip) ipt=iptables ;; ip6) ipt=ip6tables ;; *) continue ;; esac
			[[ $'\n'$("$ipt-save" -t "$table" 2>/dev/null) == *$'\n-A '* ]] || nft delete table "$family" "$table"
		done
	fi
	find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null
	if [ -f "$dir/created" ]; then
		while read -r p; do [ -n "$p" ] && rm -rf "$p"; done <"$dir/created"
	fi
	rm -rf "$run"
	log "down"
}

stop_pid() {
	local f=$1 pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	kill "$pid" 2>/dev/null
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null
	rm -f "$f"
}

# fingerprint prints what up changes on the machine outside DIR — links and addresses, iptables
# and ip6tables rules, nftables tables, the sysctls, mounts, cgroups, the folders of host_paths —
# so that a test can check that down put it all back.
fingerprint() {
	ip -o link | awk -F': ' '{ sub(/@.*/, "", $2); print "link", $2 }' | sort
	ip -o addr | awk '{ print "addr", $2, $4 }' | sort
	for ipt in iptables ip6tables; do "$ipt-save" 2>/dev/null | sed '/^#/d; s/\[[0-9]*:[0-9]*\]//' || true; done
	nft list tables 2>/dev/null || true
	for s in "${sysctls[@]}"; do printf 'sysctl %s=%s\n' "$s" "$(sysctl -n "$s" 2>/dev/null | tr '\t' ' ')"; done
	awk '{ print "mount", $2 }' /proc/mounts | sort
	find /sys/fs/cgroup -maxdepth 2 -type d 2>/dev/null | sort
	for p in "${host_paths[@]}"; do [ -e "$p" ] && echo "exists $p"; done
	true
}

# report prints what a failed test on the cluster needs to be explained: the cluster's processes
# (running or not), kube-proxy's health and the Services its rules route, the disk, the node's
# conditions, every pod's containers (ready, or waiting or stopped and why), the last events, each
# pod's last log lines, and every process's last errors.
report() {
	[ -d "$run" ] || die "no cluster up in $dir"
	log "report: the cluster's processes"
	local pidfile state
	for pidfile in "$run"/*.pid; do
		if kill -0 "$(cat "$pidfile")" 2>/dev/null; then state=running; else state="NOT RUNNING"; fi
		printf '%s: %s\n' "$(basename "$pidfile" .pid)" "$state" >&2
	done
	log "report: kube-proxy's health, and the Services its rules route (iptables nat)"
	curl -s --max-time 2 "http://$node_ip:10256/healthz" >&2 || true
	echo >&2
	iptables-save -t nat 2>/dev/null | sed -n 's/^-A KUBE-SERVICES .*--comment "\([^"]*\)".*/\1/p' >&2 || true
	log "report: the disk holding $dir"
	df -h "$dir" >&2 || true
	log "report: the node's conditions"
	kubectl get nodes -o jsonpath='{range .items[*].status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' >&2 || true
	log "report: the pods"
	kubectl get pods -A -o wide >&2 || true
	log "report: each pod's containers: ready, waiting or terminated and why, restarts"
	kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}: {.status.phase} {.status.reason} {.status.message}{range .status.containerStatuses[*]}{" | "}{.name}{" ready="}{.ready}{" waiting="}{.state.waiting.reason}{" "}{.state.waiting.message}{" terminated="}{.state.terminated.reason}{" restarts="}{.restartCount}{end}{"\n"}{end}' >&2 || true
	log "report: the last events"
	kubectl get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -30 >&2 || true
	log "report: each pod's last log lines"
	kubectl get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}' 2>/dev/null |
		while read -r ns name; do
			kubectl logs -n "$ns" "$name" --all-containers --prefix --tail=15 2>&1 | cut -c1-400 >&2 || true
		done
	log "report: each process's last errors"
	for f in "$dir"/logs/*.log; do
		grep -E '^[EF][0-9]|level=(error|fatal)|\[ERROR\]|"level":"(error|fatal)"' "$f" 2>/dev/null | tail -10 | cut -c1-400 |
			sed "s|^|$(basename "$f" .log): |" >&2 || true
	done
}

case "${1:-}" in
up)
	preflight
	# A failed up takes down what it started.
	trap 'status=$?; if [ "$status" -ne 0 ]; then log "up failed; taking it down"; down; fi; exit $status' EXIT
	up
	trap - EXIT
	;;
down) down ;;
status)
	if [ -d "$run" ]; then kubectl get nodes; else echo "no cluster up in $dir"; exit 1; fi
	;;
fingerprint) fingerprint ;;
report) report ;;
*) die "usage: $0 up | down | status | fingerprint | report" ;;
esac
