#!/usr/bin/env bash
# fake-nodes.sh: lightweight fake nodes on the running local cluster, for
# scale tests. Node objects named hostpath-fake-N, labelled and tainted
# hostpath.dev/fake-node=true:NoSchedule, kept Ready by one background process
# (tools/cmd/fakenodes) that renews their Leases; no kubelet, no pods.
#
#   scripts/fake-nodes.sh up COUNT [fakenodes flags, e.g. --no-taint]
#   scripts/fake-nodes.sh down      stop the renewer (by PID) and delete the nodes
#   scripts/fake-nodes.sh status
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

BIN=$CACHE_DIR/bin/fakenodes
[ -f "$CLUSTER_KUBECONFIG" ] || die "no local cluster (run make cluster-up)"

stop_renewer() {
  local pid
  pid_alive fake-nodes || { rm -f "$RUN_DIR/fake-nodes.pid"; return 0; }
  read -r pid _ < "$RUN_DIR/fake-nodes.pid"
  kill -TERM "$pid"
  wait_until 10 "fake node renewer $pid to stop" sh -c "! kill -0 $pid 2>/dev/null" || kill -KILL "$pid"
  rm -f "$RUN_DIR/fake-nodes.pid"
  log "Stopped the fake node renewer (PID $pid)"
}

case ${1:-} in
up)
  count=${2:?usage: fake-nodes.sh up COUNT [flags]}
  shift 2
  t0=$(now)
  mkdir -p "$(dirname "$BIN")"
  (cd "$REPO_ROOT/tools" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/fakenodes)
  stop_renewer
  start_bg fake-nodes "$LOG_DIR/fake-nodes.log" "$BIN" --kubeconfig "$CLUSTER_KUBECONFIG" --count "$count" "$@"
  wait_until 300 "$count fake nodes" sh -c "grep -qx ready '$LOG_DIR/fake-nodes.log' || ! kill -0 $(cut -d' ' -f1 "$RUN_DIR/fake-nodes.pid")"
  grep -qx ready "$LOG_DIR/fake-nodes.log" || {
    tail -5 "$LOG_DIR/fake-nodes.log" >&2
    die "fake nodes did not come up"
  }
  log "$count fake nodes Ready after $(since "$t0")s; renewer PID $(cut -d' ' -f1 "$RUN_DIR/fake-nodes.pid"), log $LOG_DIR/fake-nodes.log"
  log "Remove them with: scripts/fake-nodes.sh down"
  ;;
down)
  stop_renewer
  [ -x "$BIN" ] || (cd "$REPO_ROOT/tools" && CGO_ENABLED=0 go build -o "$BIN" ./cmd/fakenodes)
  "$BIN" --kubeconfig "$CLUSTER_KUBECONFIG" --delete
  ;;
status)
  if pid_alive fake-nodes; then echo "renewer running: PID $(cut -d' ' -f1 "$RUN_DIR/fake-nodes.pid")"; else echo "renewer not running"; fi
  kc get nodes -l hostpath.dev/fake-node=true --no-headers 2>/dev/null | awk '{print $2}' | sort | uniq -c
  ;;
*)
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 1
  ;;
esac
