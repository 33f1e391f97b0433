package reclaim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/responsibility"
)

// pvFacts are the facts that pv alone gives, on path: where its directory
// lives, and whether Reclaim finished it moments ago.
func (c *Controller) pvFacts(pv *v1.PersistentVolume, path Path) Facts {
	f := Facts{Path: path, PV: pv, Self: c.cfg.Node, Grace: c.cfg.NodeGoneGrace, Now: c.clock.Now()}
	f.Loc, f.Ours = locationOf(pv, c.cfg.ProvisionerNames)
	f.Remembered = f.Ours && c.finished.has(pv, f.Loc)
	return f
}

// libraryFacts are the facts of the library's path (Reclaim): pv's, and
// Acts, as the DeletionGuard chose this instance. The holders' answers
// come later, from the step that fans out.
func (c *Controller) libraryFacts(pv *v1.PersistentVolume) Facts {
	f := c.pvFacts(pv, LibraryPath)
	f.Acts = true
	return f
}

// facts are the facts of the Controller's pass over pv: pv's, and what
// the rule of who acts and the Nodes say of it. It asks them only what
// the PV's state makes NextStep read, as a pass did before it had this
// shape: a PV that needs nothing costs no lookup, and a failing lookup
// fails only the passes that need its answer. The holders' answers come
// later, from the step that fans out.
func (c *Controller) facts(pv *v1.PersistentVolume) (Facts, error) {
	f := c.pvFacts(pv, ControllerPath)
	if !f.Ours {
		return f, nil
	}
	obj := objectOf(pv, f.Loc)
	var err error
	if pv.DeletionTimestamp != nil {
		if hasFinalizer(pv) && pv.Status.Phase != v1.VolumeBound {
			f.Acts, err = c.acts(responsibility.Finalize, obj)
		}
		return f, err
	}
	nodeMode := !f.Loc.Multihost && f.Loc.Node != ""
	_, marked := pv.Annotations[hostpathv1.AnnotationNodeGoneSince]
	if nodeMode && f.Grace > 0 {
		if f.NodeGone, err = c.nodeGone(f.Loc.Node); err != nil {
			return f, err
		}
		if f.NodeGone || marked {
			if f.MarksNodeGone, err = c.acts(responsibility.MarkNodeGone, obj); err != nil || f.NodeGone {
				return f, err // the node-gone handling alone looks after it
			}
		}
	}
	if policyRecorded(pv) {
		return f, nil
	}
	if f.Acts, err = c.acts(responsibility.RecordPolicy, obj); err != nil || !f.Acts || !nodeMode || f.Grace > 0 {
		return f, err
	}
	f.NodeGone, err = c.nodeGone(f.Loc.Node)
	return f, err
}

// acts reports whether this instance does v for obj (responsibility.Rule).
// Every other instance writes nothing.
func (c *Controller) acts(v responsibility.Verb, obj responsibility.Object) (bool, error) {
	a, err := c.rule.Acts(v, obj)
	if err != nil {
		return false, fmt.Errorf("decide whether to %s the PersistentVolume: %w", v, err)
	}
	return a.Acts, nil
}

// objectOf is what the rule reads of pv, whose directory is at loc.
func objectOf(pv *v1.PersistentVolume, loc location) responsibility.Object {
	return responsibility.Object{Key: string(pv.UID), Multihost: loc.Multihost, Node: loc.Node}
}

// nodeGone reports whether node is gone (nodeExists).
func (c *Controller) nodeGone(node string) (bool, error) {
	exists, err := c.nodeExists(node)
	return !exists && err == nil, err
}
