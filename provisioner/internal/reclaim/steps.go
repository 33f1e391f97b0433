package reclaim

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// run does what NextStep decides on f, deciding again after a step that
// changes the facts (the holders' answers after a fan-out, the PV after
// its node-gone mark is removed), until a step ends the pass.
func (c *Controller) run(ctx context.Context, f Facts) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pv", klog.KObj(f.PV))
	if f.Ours && !f.Loc.Multihost && f.Path == ControllerPath {
		logger = klog.LoggerWithValues(logger, "volumeNode", f.Loc.Node)
	}
	ctx = klog.NewContext(ctx, logger)
	for {
		more, err := c.do(ctx, &f, NextStep(f))
		if !more || err != nil {
			return err
		}
	}
}

// do carries step out on the PV of f; more says that the pass decides
// again on f, which do updated.
func (c *Controller) do(ctx context.Context, f *Facts, step Step) (more bool, err error) {
	pv, logger := f.PV, klog.FromContext(ctx)
	switch step.Action {
	case ActNothing:
		if step.Why != "" {
			logger.V(4).Info(step.Why)
		}
		if step.After > 0 {
			c.queue.AddAfter(pv.Name, step.After)
		}
		return false, nil
	case ActFanOut:
		f.Answers, err = c.answers(ctx, step.Op, pv, f.Loc)
		if err != nil {
			return false, fmt.Errorf("PersistentVolume %q: %w", pv.Name, err)
		}
		return true, nil
	case ActWait:
		c.cfg.Recorder.Event(pv, step.Outcome.eventType, step.Outcome.reason, step.Outcome.message)
		return false, fmt.Errorf("PersistentVolume %q: %w", pv.Name, step.Outcome.err)
	case ActRelease, ActRemoveFinalizer, ActAddFinalizer:
		return false, c.doFinalizer(ctx, *f, step)
	case ActRecordPolicy, ActPolicyPending:
		return false, c.recordPolicy(ctx, pv, step)
	}
	return c.doNodeGone(ctx, f, step)
}
