#!/usr/bin/env bash
# footprint.sh: memory and CPU of the product's processes on the local
# cluster, read from /proc (the nodes' processes are this machine's):
#
#   PROGRAM      NODE             PID    RSS_MiB  PEAK_MiB  CPU_s  UP_s  CPU_m
#
# RSS is VmRSS now, PEAK is VmHWM (the highest RSS since the process
# started), CPU_s the user+system time it used, CPU_m its average use in
# millicores since it started. The manifests' requests and limits come from
# these figures (docs/operations.md, "Node agents"). With --pid PID NAME it prints the
# same line for one process of this machine (NODE "local"), as the benchmark
# does for its no-op provisioner.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

hz=$(getconf CLK_TCK)
uptime=$(cut -d' ' -f1 /proc/uptime)

# row PROGRAM NODE PID: one process's line.
row() {
  local rss hwm ticks start
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$3/status")
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$3/status")
  read -r ticks start < <(awk '{print $14 + $15, $22}' "/proc/$3/stat")
  awk -v p="$1" -v n="$2" -v pid="$3" -v rss="$rss" -v hwm="$hwm" -v t="$ticks" -v s="$start" -v hz="$hz" -v up="$uptime" 'BEGIN {
    cpu = t / hz; alive = up - s / hz
    printf "%-12s %-18s %7d %8.1f %9.1f %7.1f %7.0f %6.1f\n", p, n, pid, rss / 1024, hwm / 1024, cpu, alive, (alive > 0 ? 1000 * cpu / alive : 0)
  }'
}

printf '%-12s %-18s %7s %8s %9s %7s %7s %6s\n' PROGRAM NODE PID RSS_MiB PEAK_MiB CPU_s UP_s CPU_m
if [ "${1:-}" = --pid ]; then
  [[ ${2:-} =~ ^[0-9]+$ ]] && [ -n "${3:-}" ] || die "usage: footprint.sh [--pid PID NAME]"
  row "$3" local "$2"
  exit 0
fi
for p in manager provisioner hostdefiner; do
  for pid in $(pgrep -x "$p" || true); do
    # The node is the cgroup's first path element (cluster-lib.sh puts every
    # node's processes under a cgroup named after it).
    node=$(awk -F: '{split($3, a, "/"); print a[2]; exit}' "/proc/$pid/cgroup" 2>/dev/null) || continue
    [[ $node == "$NODE_PREFIX"* ]] || continue
    row "$p" "$node" "$pid"
  done
done
