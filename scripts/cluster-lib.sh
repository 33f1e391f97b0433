# shellcheck shell=bash
# shellcheck disable=SC2034 # The settings are used by the scripts that source this file.
# Settings and helpers of the local cluster (cluster-up.sh, cluster-down.sh,
# node-add.sh, node-remove.sh, node-start.sh, images.sh, fake-nodes.sh).
# Source it after lib.sh.
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
# NODES_MAX: the highest node number cluster-up.sh and node-add.sh accept.
NODES_MAX=50
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
# Format: <host path>:<folder under the node dir>. /var/hpextra is a
# second pool's place, for tests of pools besides the default one (e2e
# TestHelm): a pool must be a mount that is shared in the node, as on a
# systemd host, for the manager's HostToContainer propagation.
NODE_BINDS=(
  /var/hpvolumes:hpvolumes
  /var/hppools:hppools
  /var/hpextra:hpextra
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
# node_numbers: the real nodes of this cluster, in order ("1 2 ..."): those
# recorded in run/nodes (by cluster-up.sh and node-add.sh) and any other that
# has a folder under nodes/ (a start that failed half-way, a lost record).
node_numbers() {
  local d
  {
    tr ' ' '\n' < "$RUN_DIR/nodes" 2>/dev/null || true
    for d in "$NODES_DIR/$NODE_PREFIX"*; do
      if [ -d "$d" ]; then echo "${d##*/"$NODE_PREFIX"}"; fi
    done
  } | grep -xE '[0-9]+' | sort -nu | tr '\n' ' ' || true
}
# nodes_record add|del N: add node N to run/nodes or drop it from there.
nodes_record() {
  local op=$1 n=$2 list
  list=$(tr ' ' '\n' < "$RUN_DIR/nodes" 2>/dev/null | grep -xE '[0-9]+' | grep -vx "$n" || true)
  [ "$op" = add ] && list=$(printf '%s\n%s' "$list" "$n")
  printf '%s\n' "$list" | grep -xE '[0-9]+' | sort -nu | tr '\n' ' ' > "$RUN_DIR/nodes.new" || true
  mv "$RUN_DIR/nodes.new" "$RUN_DIR/nodes"
}
# node_mntns N: node N's mount namespace (recorded by node-start.sh).
node_mntns() { cat "$RUN_DIR/mntns-$1" 2>/dev/null; }

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

# start_apiserver: start kube-apiserver (on etcd, which must run), appending
# to its log; cluster-up.sh and apiserver.sh (an outage on purpose) use it.
# APISERVER_PROFILING=1 serves Go's profiles on /debug/pprof/ (for
# profiling a benchmark: scripts/apiserver.sh stop, then start with it).
start_apiserver() {
  local prog=$K8S_BIN/kube-apiserver profiling=false
  [ "${APISERVER_PROFILING:-0}" = 1 ] && profiling=true
  setsid "$prog" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$API_IP" --advertise-address="$API_IP" --secure-port="$API_PORT" \
    --endpoint-reconciler-type=lease \
    --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
    --client-ca-file="$PKI_DIR/ca.crt" \
    --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-key-file="$PKI_DIR/sa.pub" \
    --service-account-signing-key-file="$PKI_DIR/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --profiling="$profiling" \
    >> "$LOG_DIR/kube-apiserver.log" 2>&1 < /dev/null &
  record_pid kube-apiserver $! "$prog"
}

# start_kcm LIMITS: start kube-controller-manager with the client limits
# LIMITS, "QPS/BURST" or "default" (its own, 20/30), appending to its log;
# the limits are recorded in run/kcm-limits (scripts/kcm.sh reads them).
start_kcm() {
  local limits=$1 flags=() prog=$K8S_BIN/kube-controller-manager
  if [ "$limits" != default ]; then
    [[ $limits =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] || die "controller-manager client limits must be QPS/BURST or default, got '$limits'"
    flags=(--kube-api-qps="${limits%/*}" --kube-api-burst="${limits#*/}")
  fi
  echo "$limits" > "$RUN_DIR/kcm-limits"
  setsid "$prog" \
    --kubeconfig="$PKI_DIR/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$PKI_DIR/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$PKI_DIR/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --controllers='*' --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI_DIR/sa.key" --root-ca-file="$PKI_DIR/ca.crt" \
    --cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false "${flags[@]}" \
    >> "$LOG_DIR/kube-controller-manager.log" 2>&1 < /dev/null &
  record_pid kube-controller-manager $! "$prog"
}

# kcm_healthy: kube-controller-manager answers ok on /healthz.
kcm_healthy() { [ "$(curl -sk --max-time 2 https://127.0.0.1:10257/healthz)" = ok ]; }

# restart_daemonsets NAMESPACE TIMEOUT DS...: restart the DaemonSets (new
# pods, so fresh processes) and wait, at most TIMEOUT seconds each, until
# every one has rolled out; die naming the one that did not.
restart_daemonsets() {
  local ns=$1 timeout=$2 ds
  shift 2
  kc -n "$ns" rollout restart "${@/#/ds/}" > /dev/null
  for ds in "$@"; do
    kc -n "$ns" rollout status "ds/$ds" --timeout="${timeout}s" > /dev/null ||
      die "DaemonSet $ds did not roll out within ${timeout}s"
  done
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

# cluster_running: this checkout's cluster is up: its API server runs and is
# ready.
cluster_running() {
  [ -f "$CLUSTER_KUBECONFIG" ] && pid_alive kube-apiserver && kc get --raw /readyz > /dev/null 2>&1
}

# start_node N: start real node N the way cluster-up.sh starts each of its
# nodes: its address on the API bridge, its folders under nodes/<node>/ with a
# fresh machine-id, its cgroups, then node-start.sh N (containerd with the
# cached images, kubelet) in a new private mount namespace. Returns once the
# node is registered (not yet Ready). Needs the node's kubelet certificate
# (cluster-pki.sh) and the running API server.
start_node() {
  local n=$1 nd name b h
  nd=$(node_dir "$n")
  name=$(node_name "$n")
  ip addr add "$(node_ip "$n")/32" dev "$API_BRIDGE"
  for b in "${NODE_BINDS[@]}"; do mkdir -p "$nd/${b#*:}"; done
  mkdir -p "$nd/etc" "$nd/kubelet-pki"
  od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$nd/machine-id"
  echo >> "$nd/machine-id"
  # cgroup v1: kubelet needs its cgroupRoot in every hierarchy.
  for h in /sys/fs/cgroup/*/; do
    [ "$h" = /sys/fs/cgroup/unified/ ] && continue
    mkdir -p "$h$name"
  done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$name/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$name/cpuset.mems"
  unshare --mount --propagation private -- "$REPO_ROOT/scripts/node-start.sh" "$n"
}

# import_images N NAME...: import the image tarballs $IMAGES_DIR/NAME.tar
# (images.sh) into node N's containerd, except those the node already has:
# it keeps the key of every image it imported in nodes/<node>/images/.
# A NAME PROGRAM-VERSION.oci is a release's OCI archive (images.sh
# --release): its image index is imported as hostpath.dev/PROGRAM:VERSION
# and as hostpath.dev/PROGRAM@<index digest>, the name dist/hostpath.yaml
# pulls by.
import_images() {
  local n=$1 f nd imported=() opts
  shift
  nd=$(node_dir "$n")
  mkdir -p "$nd/images"
  for f in "$@"; do
    [ -f "$IMAGES_DIR/$f.key" ] && cmp -s "$IMAGES_DIR/$f.key" "$nd/images/$f.key" && continue
    opts=()
    case $f in *.oci) opts=(--base-name "hostpath.dev/${f%%-*}" --digests) ;; esac
    ctr --address "$(node_sock "$n")" -n k8s.io images import "${opts[@]+"${opts[@]}"}" "$IMAGES_DIR/$f.tar" > /dev/null ||
      die "importing $f into $(node_name "$n") failed"
    if [ -f "$IMAGES_DIR/$f.key" ]; then cp "$IMAGES_DIR/$f.key" "$nd/images/$f.key"; fi
    imported+=("$f")
  done
  [ ${#imported[@]} -eq 0 ] || log "Imported ${imported[*]} into $(node_name "$n")"
}

# stop_recorded NAME...: SIGTERM the processes recorded in run/NAME.pid
# together, wait up to STOP_TIMEOUT seconds, then SIGKILL what is left; the
# PID files go.
STOP_TIMEOUT=${STOP_TIMEOUT:-8}
stop_recorded() {
  local name pid exe live=() left i
  for name in "$@"; do
    [ -f "$RUN_DIR/$name.pid" ] || continue
    read -r pid exe < "$RUN_DIR/$name.pid" || true
    if pid_alive "$name" && kill -TERM "$pid" 2>/dev/null; then live+=("$pid"); fi
    rm -f "$RUN_DIR/$name.pid"
  done
  [ ${#live[@]} -gt 0 ] || return 0
  for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
    left=()
    for pid in "${live[@]}"; do [ -e "/proc/$pid" ] && left+=("$pid"); done
    live=("${left[@]+"${left[@]}"}")
    [ ${#live[@]} -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${live[@]+"${live[@]}"}"; do
    log "PID $pid did not stop after ${STOP_TIMEOUT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  done
  return 0
}

# node_pids N: the processes in node N's mount namespace: containerd,
# kubelet, shims, containers, and whatever they started.
node_pids() {
  local ns pids p
  ns=$(node_mntns "$1") || return 0
  [ -n "$ns" ] || return 0
  pids=$(find /proc/[0-9]*/ns/mnt -maxdepth 0 -printf '%l %p\n' 2>/dev/null |
    awk -v ns="$ns" '$1 == ns { split($2, f, "/"); print f[3] }') || true
  # The namespace number of a node that is gone may be reused: it is the
  # node's only if its /etc/machine-id is the node's.
  for p in $pids; do
    if grep -qF "/$(node_name "$1")/machine-id /etc/machine-id " "/proc/$p/mountinfo" 2>/dev/null; then
      echo "$pids"
      return 0
    fi
    [ -e "/proc/$p" ] && return 0
  done
  return 0
}

# node_cgroup_pids N: the processes in node N's cgroups (kubelet's
# cgroupRoot /hostpath-node-N: the pods' containers).
node_cgroup_pids() {
  find /sys/fs/cgroup/*/"$(node_name "$1")" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -nu || true
}

# stop_nodes N...: stop these real nodes, every process by PID: the kubelets
# first (so nothing restarts the containers stopped next), the containers
# (their init processes, from runc's state files) and containerd shims
# (containerd 1.6 keeps no shim PID file: the shim programs in the node's
# mount namespace), the containerds, and last whatever else still runs in a
# node's mount namespace or cgroups.
stop_nodes() {
  local n st pid start p
  # shellcheck disable=SC2046 # one word per node
  stop_recorded $(for n in "$@"; do echo "kubelet-$n"; done)
  for n in "$@"; do
    for st in "$(node_dir "$n")"/run-containerd/runc/*/*/state.json; do
      [ -f "$st" ] || continue
      pid=$(grep -o '"init_process_pid":[0-9]*' "$st" | cut -d: -f2) || true
      start=$(grep -o '"init_process_start":[0-9]*' "$st" | cut -d: -f2) || true
      [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || continue
      # Same process only if it started when runc recorded (PIDs are reused).
      if [ "$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f20)" = "$start" ]; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
    for p in $(node_pids "$n"); do
      case $(readlink "/proc/$p/exe" 2>/dev/null) in
      */containerd-shim*) kill -KILL "$p" 2>/dev/null || true ;;
      esac
    done
  done
  # shellcheck disable=SC2046 # one word per node
  stop_recorded $(for n in "$@"; do echo "containerd-$n"; done)
  for n in "$@"; do
    for p in $(node_pids "$n") $(node_cgroup_pids "$n"); do
      log "Leftover process $p of $(node_name "$n"): $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-120): SIGKILL"
      kill -KILL "$p" 2>/dev/null || true
    done
  done
  return 0
}

# remove_cgroups DIR...: remove these cgroups and those below them (they
# empty out once their processes are gone: retried for 5 s).
remove_cgroups() {
  local c i
  for c in "$@"; do
    [ -d "$c" ] || continue
    for ((i = 0; i < 50; i++)); do
      find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$c" ] || break
      sleep 0.1
    done
    if [ -d "$c" ]; then log "WARNING: cgroup $c is still in use"; fi
  done
  return 0
}
