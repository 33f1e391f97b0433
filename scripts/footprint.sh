#!/usr/bin/env bash
# footprint.sh: memory and CPU of the product's processes on the local
# cluster, read from /proc (the nodes' processes are this machine's):
#
#   PROGRAM  NODE  PID  RSS_MiB  PEAK_MiB  CPU_s  UP_s  CPU_m  ANON_MiB  POD_MiB
#
# RSS is VmRSS now, PEAK is VmHWM (the highest RSS since the process
# started), CPU_s the user+system time it used, CPU_m its average use in
# millicores since it started. RSS counts the pages of the program's file
# that are mapped, shared with the page cache; ANON is the process's own
# memory (RssAnon), and POD the working set of its container's memory
# cgroup (usage minus inactive page cache), the figure the kubelet reports
# and the memory limit holds to, in which the file's pages count only when
# the container read them into the page cache itself. The manifests'
# requests and limits come from these figures (docs/operations.md, "Node
# agents"). With --pid PID NAME it prints the same line for one process of
# this machine (NODE "local", POD "-"), as the benchmark does for its no-op
# provisioner.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

hz=$(getconf CLK_TCK)
uptime=$(cut -d' ' -f1 /proc/uptime)

# pod_mib PID: the working set in MiB of PID's memory cgroup (cgroup v1
# or v2), "-" for a process outside the nodes' cgroups.
pod_mib() {
  local cg dir usage inactive
  if cg=$(awk -F: '$2 == "memory" {print $3; exit}' "/proc/$1/cgroup") && [ -n "$cg" ]; then
    dir=/sys/fs/cgroup/memory$cg
    usage=$(cat "$dir/memory.usage_in_bytes" 2> /dev/null) || usage=
    inactive=$(awk '$1 == "total_inactive_file" {print $2}' "$dir/memory.stat" 2> /dev/null) || inactive=
  else
    cg=$(awk -F: '$1 == "0" {print $3; exit}' "/proc/$1/cgroup")
    dir=/sys/fs/cgroup$cg
    usage=$(cat "$dir/memory.current" 2> /dev/null) || usage=
    inactive=$(awk '$1 == "inactive_file" {print $2}' "$dir/memory.stat" 2> /dev/null) || inactive=
  fi
  if [[ $cg == /"$NODE_PREFIX"* && -n $usage && -n $inactive ]]; then
    awk -v u="$usage" -v i="$inactive" 'BEGIN {printf "%.1f", (u - i) / 1048576}'
  else
    echo -
  fi
}

# row PROGRAM NODE PID: one process's line.
row() {
  local rss hwm anon ticks start pod=-
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$3/status")
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$3/status")
  anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$3/status")
  read -r ticks start < <(awk '{print $14 + $15, $22}' "/proc/$3/stat")
  [ "$2" = local ] || pod=$(pod_mib "$3")
  awk -v p="$1" -v n="$2" -v pid="$3" -v rss="$rss" -v hwm="$hwm" -v anon="$anon" -v pod="$pod" -v t="$ticks" -v s="$start" -v hz="$hz" -v up="$uptime" 'BEGIN {
    cpu = t / hz; alive = up - s / hz
    printf "%-12s %-18s %7d %8.1f %9.1f %7.1f %7.0f %6.1f %9.1f %8s\n", p, n, pid, rss / 1024, hwm / 1024, cpu, alive, (alive > 0 ? 1000 * cpu / alive : 0), anon / 1024, pod
  }'
}

printf '%-12s %-18s %7s %8s %9s %7s %7s %6s %9s %8s\n' PROGRAM NODE PID RSS_MiB PEAK_MiB CPU_s UP_s CPU_m ANON_MiB POD_MiB
if [ "${1:-}" = --pid ]; then
  [[ ${2:-} =~ ^[0-9]+$ ]] && [ -n "${3:-}" ] || die "usage: footprint.sh [--pid PID NAME]"
  row "$3" local "$2"
  exit 0
fi
for p in "${PRODUCT_PROGRAMS[@]}"; do
  for pid in $(pgrep -x "$p" || true); do
    # The node is the cgroup's first path element (cluster-lib.sh puts every
    # node's processes under a cgroup named after it).
    node=$(awk -F: '{split($3, a, "/"); print a[2]; exit}' "/proc/$pid/cgroup" 2>/dev/null) || continue
    [[ $node == "$NODE_PREFIX"* ]] || continue
    row "$p" "$node" "$pid"
  done
done
