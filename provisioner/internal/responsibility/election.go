package responsibility

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"hostpath.dev/provisioner/internal/podstub"
)

// The election, without a leader: rendezvous (highest random weight)
// hashing of an object's key over the live instances. Every instance that
// sees the same set of live instances elects the same one, and when an
// instance comes or goes only the keys it was elected for (or will be)
// move.

// Winner returns the candidate with the highest rendezvous weight for key,
// or "" when there is no candidate. The result does not depend on the
// order of candidates.
func Winner(key string, candidates []string) string {
	var (
		best       string
		bestWeight uint64
	)
	for _, c := range candidates {
		w := weight(key, c)
		if best == "" || w > bestWeight || w == bestWeight && c < best {
			best, bestWeight = c, w
		}
	}
	return best
}

// weight is the rendezvous weight of candidate for key: the first 8 bytes,
// big-endian, of SHA-256(key NUL candidate). Every instance must compute
// the same weights, so this never changes. The bytes hashed are gathered
// on the stack (a heap buffer only for keys and names longer than buf):
// Winner calls weight once per candidate.
func weight(key, candidate string) uint64 {
	var buf [128]byte
	sum := sha256.Sum256(append(append(append(buf[:0], key...), 0), candidate...))
	return binary.BigEndian.Uint64(sum[:8])
}

// PodInstances are the provisioner instances (one pod per node), read
// from the cache of their pods (podstub), which holds the pods the
// instance selector selects and no other (the API server selects them),
// and named by their node.
type PodInstances struct {
	pods podstub.Lister
	self string
}

var _ Instances = &PodInstances{}

// NewPodInstances returns the instances whose pods are in pods. self is
// the node of the calling instance.
func NewPodInstances(pods podstub.Lister, self string) *PodInstances {
	return &PodInstances{pods: pods, self: self}
}

// Live returns the sorted nodes of the instances whose pod is Ready and not
// terminating. The calling instance is always included: it is alive, even
// while its own pod is not Ready yet.
func (i *PodInstances) Live() ([]string, error) {
	pods, err := i.pods.List()
	if err != nil {
		return nil, fmt.Errorf("list provisioner pods: %w", err)
	}
	nodes := []string{i.self}
	for _, p := range pods {
		if p.Serving() {
			nodes = append(nodes, p.NodeName)
		}
	}
	slices.Sort(nodes)
	return slices.Compact(nodes), nil
}

// OnNode reports whether an instance pod that is not terminating is
// scheduled to node, Ready or not.
func (i *PodInstances) OnNode(node string) (bool, error) {
	if node == i.self {
		return true, nil
	}
	pods, err := i.pods.List()
	if err != nil {
		return false, fmt.Errorf("list provisioner pods: %w", err)
	}
	for _, p := range pods {
		if p.NodeName == node && p.DeletionTimestamp == nil {
			return true, nil
		}
	}
	return false, nil
}

// Elected reports whether the calling instance is the one elected for key
// among the live instances.
func (i *PodInstances) Elected(key string) (bool, error) {
	live, err := i.Live()
	if err != nil {
		return false, err
	}
	return Winner(key, live) == i.self, nil
}
