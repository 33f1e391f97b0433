#!/usr/bin/env bash
# node-start.sh N: start real node N (containerd + kubelet). start_node in
# cluster-lib.sh (cluster-up.sh, node-add.sh) and node-reboot.sh run it as
# `unshare --mount --propagation private -- node-start.sh N`, so the
# bind mounts below exist only in this node's mount namespace, which
# containerd, kubelet and every container of the node inherit: the node has
# its own /var/hpvolumes, /var/lib/hostpath, /etc/machine-id, ... backed by
# .cluster/nodes/<node>/ on this machine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

N=${1:?node number}
NODE=$(node_name "$N")
ND=$(node_dir "$N")
IP=$(node_ip "$N")

# Refuse to mount anything in the host's own mount namespace.
[ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] ||
  die "node-start.sh must run in a private mount namespace (use cluster-up.sh or node-add.sh)"

# cluster-down.sh finds this node's containerd shims by their mount namespace.
readlink /proc/self/ns/mnt > "$RUN_DIR/mntns-$N"
for b in "${NODE_BINDS[@]}"; do
  mount --bind "$ND/${b#*:}" "${b%%:*}"
  # Shared inside this node's namespace, as mounts are on a systemd host, so
  # that containers may mount them with mountPropagation HostToContainer
  # (the manager's pool). The host's namespace is not a peer: it stays
  # untouched.
  mount --make-shared "${b%%:*}"
done
mount --bind "$ND/machine-id" /etc/machine-id
# A boot ID of this node's own, new at every start (a "boot": cluster-up.sh,
# node-add.sh, node-reboot.sh), where the kubelet reads it and where the
# e2e install makes the manager read it (hostPath of this file): all nodes
# share one kernel, whose boot ID never changes while this machine runs.
cat /proc/sys/kernel/random/uuid > "$ND/boot_id"
mount --bind "$ND/boot_id" /proc/sys/kernel/random/boot_id

cat > "$ND/etc/containerd.toml" <<EOT
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  enable_selinux = false
  # This machine drops CAP_SYS_RESOURCE: runc cannot lower oom_score_adj.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  max_container_log_line_size = 16384
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "/run/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ND/etc/cni"
    max_conf_num = 1
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd/opt"
EOT
mkdir -p "$ND/etc/cni"
cat > "$ND/etc/cni/10-hostpath.conflist" <<EOT
{
  "cniVersion": "1.0.0",
  "name": "hostpath$N",
  "plugins": [
    {"type": "bridge", "bridge": "$(node_bridge "$N")", "isGateway": true, "isDefaultGateway": false,
     "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.18.$N.0/24"}]],
              "routes": [{"dst": "$NET_RANGE"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOT

t0=$(now)
start_bg "containerd-$N" "$LOG_DIR/containerd-$NODE.log" containerd --config "$ND/etc/containerd.toml"
wait_until 30 "containerd of $NODE" ctr --address /run/containerd/containerd.sock version
log "$NODE: containerd up after $(since "$t0")s"
# Every cached image (images.sh), once no image build is in progress
# (images.sh holds the lock while it builds and imports).
mkdir -p "$IMAGES_DIR"
(
  flock -s -w 600 8 || log "$NODE: images are still being built after 600s: importing the cached ones"
  imgs=()
  for img in "$IMAGES_DIR"/*.tar; do
    if [ -f "$img" ]; then imgs+=("$(basename "$img" .tar)"); fi
  done
  import_images "$N" "${imgs[@]+"${imgs[@]}"}"
) 8>> "$IMAGES_DIR/.lock"
log "$NODE: images imported after $(since "$t0")s"

cat > "$ND/etc/kubelet.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $IP
port: 10250
readOnlyPort: 0
healthzBindAddress: $IP
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$NODE
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
imageServiceEndpoint: unix:///run/containerd/containerd.sock
staticPodPath: $ND/etc/static-pods
clusterDomain: cluster.local
clusterDNS: [$CLUSTER_DNS]
resolvConf: /etc/resolv.conf
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
nodeStatusUpdateFrequency: 10s
nodeStatusReportFrequency: 1m
syncFrequency: 10s
# The kubelet measures volumes (kubelet_volume_stats_*) every 10s instead of
# every minute, so that TestLocalVolumes sees a claim's figures soon.
volumeStatsAggPeriod: 10s
fileCheckFrequency: 5s
# Images are imported, never pulled: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 110
serializeImagePulls: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
localStorageCapacityIsolation: true
EOT
mkdir -p "$ND/etc/static-pods"
t1=$(now)
start_bg "kubelet-$N" "$LOG_DIR/kubelet-$NODE.log" "$K8S_BIN/kubelet" \
  --config="$ND/etc/kubelet.yaml" --kubeconfig="$PKI_DIR/kubelet-$NODE.kubeconfig" \
  --hostname-override="$NODE" --node-ip="$IP" --root-dir=/var/lib/kubelet \
  --cert-dir="$ND/kubelet-pki" --v=2
wait_until 60 "node $NODE registered" kc get node "$NODE" || {
  tail -20 "$LOG_DIR/kubelet-$NODE.log" >&2
  die "$NODE did not register"
}
log "$NODE: registered $(since "$t1")s after kubelet start"
