# shellcheck shell=bash
# shellcheck disable=SC2034 # The settings are used by the scripts that source this file.
# Settings and helpers of the local cluster (cluster-up.sh, cluster-down.sh,
# node-start.sh, images.sh, fake-nodes.sh). Source it after lib.sh.
#
# Everything the cluster creates on this machine is recorded under
# CLUSTER_DIR (git-ignored), so cluster-down.sh can undo exactly that.

CLUSTER_DIR=${CLUSTER_DIR:-$REPO_ROOT/.cluster}
CLUSTER_KUBECONFIG=$CLUSTER_DIR/kubeconfig
RUN_DIR=$CLUSTER_DIR/run
LOG_DIR=$CLUSTER_DIR/logs
PKI_DIR=$CLUSTER_DIR/pki
NODES_DIR=$CLUSTER_DIR/nodes
IMAGES_DIR=$CACHE_DIR/images
KUBECTL=$K8S_BIN/kubectl

# NODES is the number of real nodes (kubelet + containerd each).
NODES=${NODES:-2}
NODE_PREFIX=hostpath-node-
# Addresses: all inside 198.18.0.0/15, which a blackhole route keeps on this
# machine. 198.18.0.1 is the API server, 198.18.0.1N node N's kubelet,
# 198.18.N.0/24 node N's pods, 198.19.0.0/16 the Services.
NET_RANGE=198.18.0.0/15
API_IP=198.18.0.1
API_PORT=6443
API_BRIDGE=hpapi
POD_CIDR=198.18.0.0/16
SERVICE_CIDR=198.19.0.0/16
CLUSTER_DNS=198.19.0.10
# Sysctls kubelet, kube-proxy or the CNI bridge may change; saved before the
# first start and written back by cluster-down.sh.
SAVED_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
  net.ipv4.conf.all.route_localnet net.netfilter.nf_conntrack_max
  net.bridge.bridge-nf-call-iptables)
# Host paths that every node sees as its own: each is bind-mounted, inside the
# node's private mount namespace, from a folder of .cluster/nodes/<node>/.
# Format: <host path>:<folder under the node dir>.
NODE_BINDS=(
  /var/hpvolumes:hpvolumes
  /var/lib/hostpath:state
  /var/lib/containerd:containerd
  /run/containerd:run-containerd
  /var/lib/kubelet:kubelet
  /var/lib/cni:cni
  /run/netns:netns
  /var/log/pods:log-pods
  /var/log/containers:log-containers
)

node_name() { echo "$NODE_PREFIX$1"; }
node_ip() { echo "198.18.0.$((10 + $1))"; }
node_dir() { echo "$NODES_DIR/$(node_name "$1")"; }
node_bridge() { echo "hpbr$1"; }
# node_sock N: node N's containerd socket, as seen from this machine.
node_sock() { echo "$(node_dir "$1")/run-containerd/containerd.sock"; }
# node_numbers: the nodes this cluster was started with (1 2 ...).
node_numbers() { cat "$RUN_DIR/nodes" 2>/dev/null || true; }

kc() { "$KUBECTL" --kubeconfig "$CLUSTER_KUBECONFIG" "$@"; }

# now / since T: wall-clock seconds for the timings the scripts print.
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# pid_alive NAME: the process recorded in run/NAME.pid still runs the same
# executable (a PID reused by another program does not count).
pid_alive() {
  local f=$RUN_DIR/$1.pid pid exe
  [ -f "$f" ] || return 1
  read -r pid exe < "$f" || true
  [ -n "$pid" ] && [ -e "/proc/$pid" ] || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]
}

# record_pid NAME PID EXECUTABLE: remember a started process and the program
# it runs (the PID may still be the forking shell when this is called).
record_pid() {
  echo "$2 $(readlink -f "$3")" > "$RUN_DIR/$1.pid"
}

# start_bg NAME LOG PROGRAM ARGS...: start PROGRAM in its own session (so a
# Ctrl-C of the calling make does not reach it) and record its PID.
start_bg() {
  local name=$1 logf=$2 prog
  shift 2
  prog=$(command -v "$1")
  setsid "$@" > "$logf" 2>&1 < /dev/null &
  record_pid "$name" $! "$prog"
}

# wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.2 s.
wait_until() {
  local timeout=$1 what=$2 t0
  shift 2
  t0=$(now)
  until "$@" >/dev/null 2>&1; do
    if awk -v a="$t0" -v b="$(now)" -v t="$timeout" 'BEGIN { exit !(b - a > t) }'; then
      log "Timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

# foreign_cluster: exit 0 and print the PID of a kube-apiserver that serves on
# API_IP:API_PORT but was not started from this checkout (another clone's
# cluster: this one must leave the shared addresses alone).
foreign_cluster() {
  local p mine=""
  [ -f "$RUN_DIR/kube-apiserver.pid" ] && mine=$(cut -d' ' -f1 "$RUN_DIR/kube-apiserver.pid")
  for p in $(ss -ltnpH "src $API_IP:$API_PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    [ "$p" = "$mine" ] && continue
    echo "$p"
    return 0
  done
  return 1
}

# refuse_foreign_cluster: die if another checkout's cluster is running.
refuse_foreign_cluster() {
  local p
  p=$(foreign_cluster) || return 0
  die "a local cluster of another checkout is running (kube-apiserver PID $p: $(tr '\0' ' ' < "/proc/$p/cmdline" | grep -o -- '--tls-cert-file=[^ ]*')); stop it with make cluster-down there first"
}

require_root() {
  [ "$(id -u)" -eq 0 ] || die "the local cluster needs root (kubelet, containerd, bridges, iptables)"
}
