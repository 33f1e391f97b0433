#!/usr/bin/env bash
# demo.sh (make demo, after cluster-up, images and deploy): show the nodes and
# the product, run a pod on every real node that writes into the hostPath
# /var/hpvolumes/demo, and show where each file is on this machine. The
# cluster stays up.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster-lib.sh"

kc get nodes -o wide
echo
kc -n hostpath-system get pods -o wide 2>/dev/null || true
echo
nodes=$(kc get nodes -l '!hostpath.dev/fake-node' -o jsonpath='{.items[*].metadata.name}')
for node in $nodes; do
  kc delete pod "demo-$node" --ignore-not-found --wait=true > /dev/null
  kc apply -f - > /dev/null <<EOY
apiVersion: v1
kind: Pod
metadata: {name: demo-$node, namespace: default}
spec:
  nodeName: $node
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: hostpath.dev/testtools:dev
    imagePullPolicy: IfNotPresent
    command: [/bin/sh, -c, 'echo "hello from pod \$HOSTNAME on node $node at \$(date -u +%FT%TZ)" > /out/$node.txt']
    volumeMounts: [{name: out, mountPath: /out}]
  volumes:
  - name: out
    hostPath: {path: /var/hpvolumes/demo, type: DirectoryOrCreate}
EOY
done
for node in $nodes; do
  kc wait --for=jsonpath='{.status.phase}'=Succeeded "pod/demo-$node" --timeout=120s > /dev/null
  f=$NODES_DIR/$node/hpvolumes/demo/$node.txt
  echo "Pod demo-$node wrote /var/hpvolumes/demo/$node.txt on $node; on this machine: $f"
  echo "  $(cat "$f")"
  kc delete pod "demo-$node" --wait=false > /dev/null
done
echo
echo "The cluster stays up:  export KUBECONFIG=$CLUSTER_KUBECONFIG PATH=$K8S_BIN:\$PATH"
echo "Stop it with:          make cluster-down"
