package resize

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/provisioner/internal/fanout"
)

// result is one node's answer to SetSize (or the failure to find its
// manager).
type result struct {
	node string
	vol  *managerapi.Volume
	err  error
}

// kind is how a resize attempt ended.
type kind int

const (
	// grown: every node holds the new size.
	grown kind = iota
	// infeasible: a node refused the size for good; the claim waits for
	// the user to change the request.
	infeasible
	// failed: a node could not be asked, or failed otherwise; retried.
	failed
)

// outcome is the end of a resize attempt: the message of the event (and of
// the condition ControllerResizeError when not grown), and for failed the
// error to retry with.
type outcome struct {
	kind    kind
	message string
	err     error
}

// refusedForGood reports whether a manager's answer refuses a size for good
// (managerapi.Classify): no space for the growth (507), or a conflict (409: the
// volume is larger already, volumes never shrink).
func refusedForGood(err error) bool {
	a := managerapi.Classify(err)
	return a == managerapi.AnswerNoSpace || a == managerapi.AnswerConflict
}

// outcomeOf maps the answers of the nodes of a volume, asked to grow it to
// size, to the outcome: grown when every node succeeded; infeasible when any
// node refused the size for good (refusedForGood), whatever the others
// answered; failed otherwise. what names the volume ("volume \"pv-1\"").
func outcomeOf(what string, size resource.Quantity, results []result) outcome {
	var refused, broken, hints []string
	var errs []error
	var enforcement []string
	for _, r := range results {
		switch {
		case r.err == nil:
			e := hostpathv1.EnforcementNone
			if r.vol != nil && r.vol.Enforcement != "" {
				e = r.vol.Enforcement
			}
			enforcement = append(enforcement, e)
		case refusedForGood(r.err):
			refused = append(refused, fmt.Sprintf("node %q: %s", r.node, answer(r.err)))
			hint := "the growth must fit in the pool of every node"
			if managerapi.Classify(r.err) == managerapi.AnswerConflict {
				hint = "volumes never shrink"
			}
			if !slices.Contains(hints, hint) {
				hints = append(hints, hint)
			}
		default:
			broken = append(broken, fmt.Sprintf("node %q: %s", r.node, answer(r.err)))
			errs = append(errs, fmt.Errorf("node %q: %w", r.node, r.err))
		}
	}
	switch {
	case len(refused) > 0:
		return outcome{kind: infeasible, message: fmt.Sprintf(
			"Cannot grow %s to %s: %s; %s: change the request to try again",
			what, size.String(), strings.Join(refused, "; "), strings.Join(hints, ", and "))}
	case len(broken) > 0:
		return outcome{kind: failed, err: fmt.Errorf("grow %s to %s: %w", what, size.String(), errors.Join(errs...)),
			message: fmt.Sprintf("Failed to grow %s to %s (will retry): %s", what, size.String(), strings.Join(broken, "; "))}
	}
	slices.Sort(enforcement)
	return outcome{kind: grown, message: fmt.Sprintf("Resized %s to %s on %s (size enforcement: %s)",
		what, size.String(), fanout.NodeList(nodesOf(results)), strings.Join(slices.Compact(enforcement), ", "))}
}

// answer is the manager's message in err, or err's text when err is no
// answer of a manager.
func answer(err error) string {
	var e *managerapi.Error
	if errors.As(err, &e) && e.Message != "" {
		return fmt.Sprintf("%s (%d %s)", e.Message, e.StatusCode, e.Reason)
	}
	return err.Error()
}

// nodesOf returns the nodes of results, in order.
func nodesOf(results []result) []string {
	nodes := make([]string, len(results))
	for i, r := range results {
		nodes[i] = r.node
	}
	return nodes
}
