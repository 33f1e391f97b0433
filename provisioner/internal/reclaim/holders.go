package reclaim

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
)

// The fan-out: the nodes that may hold a PV's directory (holders), one
// bounded parallel call to each (package fanout, on
// workqueue.ParallelizeUntil), and each answer judged (judge): the
// holders' answers that NextStep decides on.
//
// Holders: node mode, the PV's node, required while its Node exists.
// Multihost: every node the PV lists (hostpath.dev/nodes and
// hostpath.dev/pending-nodes), required while its Node exists, and every
// other node with a Ready or defining HostDefinition of the pool (the host
// definer may have given it the directory without the PV saying so yet),
// called when its manager serves. A listed node whose Node object is gone
// is skipped: gone for good, the only exception. The call: with reclaim
// policy Delete, DELETE ...?owner={pv}; otherwise the owner record is
// marked retained with policy Retain; to follow a policy change, the
// record gets the PV's policy.

// holder is a node that may hold a PV's directory.
type holder struct {
	node string
	// required: the PV waits until this node has answered for good.
	required bool
	// gone: a node the PV names whose Node object no longer exists; it is
	// not called and the PV does not wait for it.
	gone bool
}

// holders returns, sorted, the nodes that may hold loc.
func (c *Controller) holders(loc location) ([]holder, error) {
	if !loc.Multihost {
		if loc.Node == "" {
			return nil, nil
		}
		exists, err := c.nodeExists(loc.Node)
		if err != nil {
			return nil, err
		}
		return []holder{{node: loc.Node, required: exists, gone: !exists}}, nil
	}
	named := slices.Concat(loc.Nodes, loc.PendingNodes)
	var defined []string
	if c.cfg.Targets != nil {
		ready, pending, err := c.cfg.Targets.Targets(loc.Pool)
		if err != nil {
			return nil, fmt.Errorf("list the nodes of pool %q: %w", loc.Pool, err)
		}
		defined = slices.Concat(ready, pending)
	}
	all := slices.Concat(named, defined)
	slices.Sort(all)
	var out []holder
	for _, n := range slices.Compact(all) {
		if !slices.Contains(named, n) {
			out = append(out, holder{node: n})
			continue
		}
		exists, err := c.nodeExists(n)
		if err != nil {
			return nil, err
		}
		out = append(out, holder{node: n, required: exists, gone: !exists})
	}
	return out, nil
}

// nodeExists reports whether the Node of node exists (Config.Nodes, which
// says missing only on the API server's answer of now: every step that
// writes because a Node is gone, a mark, a PV deleted, a finalizer
// removed without the directory's removal, acts on this answer).
func (c *Controller) nodeExists(node string) (bool, error) {
	exists, err := c.nodes.Exists(node)
	if err != nil {
		return false, fmt.Errorf("look Node %q up: %w", node, err)
	}
	return exists, nil
}

// answers makes op's call on every node that may hold pv's directory,
// at loc, and returns each holder's state (never nil).
func (c *Controller) answers(ctx context.Context, op operation, pv *v1.PersistentVolume, loc location) ([]nodeResult, error) {
	holders, err := c.holders(loc)
	if err != nil {
		return nil, err
	}
	return c.fanOut(ctx, op, pv, loc, holders), nil
}

// fanOut makes op's call on every holder of loc, in parallel, and returns
// each holder's state.
func (c *Controller) fanOut(ctx context.Context, op operation, pv *v1.PersistentVolume, loc location, holders []holder) []nodeResult {
	results := make([]nodeResult, len(holders))
	index := map[string]int{}
	var call []string
	for i, h := range holders {
		results[i] = nodeResult{node: h.node, state: nodeSkipped}
		if h.gone {
			results[i].detail = detailGone
			continue
		}
		index[h.node] = i
		call = append(call, h.node)
	}
	opts := c.cfg.Fanout
	opts.Retryable = managerapi.Retryable
	r := fanout.Run(ctx, call, func(ctx context.Context, node string) error {
		mgr, err := c.cfg.Managers(node)
		if err != nil {
			return fmt.Errorf("no manager serves: %w", err)
		}
		return op.call(ctx, mgr, pv, loc)
	}, opts)
	for _, nr := range r.Nodes {
		i := index[nr.Node]
		h := holders[i]
		if nr.Err != nil && managerapi.Classify(nr.Err) == managerapi.AnswerUnreachable && !h.required {
			// A node that may hold the directory but cannot be asked: its
			// sweeper acts by the owner record once the PV is gone.
			results[i] = nodeResult{node: h.node, state: nodeSkipped, detail: nr.Err.Error()}
			continue
		}
		state, detail := judge(op, h.required, loc.Pool, nr.Err)
		results[i] = nodeResult{node: h.node, state: state, detail: detail}
	}
	c.cfg.FanoutMetrics.Observe(op.metricName(), r)
	return results
}
