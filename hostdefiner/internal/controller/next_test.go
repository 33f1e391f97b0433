package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
)

// none is the "phase" of a (node, pool) without a definition, in the
// tables below.
const none hostpathv1.Phase = "(none)"

// now is the time of the facts in the tables: a minute after the last try
// of readyDefinition, 9 minutes before its re-verify.
var now = t0.Add(time.Minute)

// healthy are the facts of key1 in a healthy cluster: a class names the
// pool, node-1 exists, the manager DaemonSet runs there and its manager pod
// serves; def is the definition (nil: none).
func healthy(def *hostpathv1.HostDefinition) Facts {
	return Facts{
		Key: key1, Definition: def, Node: newNode("node-1"), ManagerPods: []*v1.Pod{managerPod("node-1")},
		DaemonSet: hostpathtest.ManagerDaemonSet(testNamespace, testDaemonSet), PoolNamed: true, Now: now,
	}
}

// inPhase is the definition of key1 in phase after tries tries (the last
// at t0), the Defined condition False with reason, the next try at next
// (none when zero).
func inPhase(phase hostpathv1.Phase, tries int32, reason string, next time.Time) *hostpathv1.HostDefinition {
	d := readyDefinition("node-1", hostpathv1.DefaultPool, t0.Add(-time.Hour))
	d.Status.Phase, d.Status.Tries = phase, tries
	d.Status.Conditions[0] = metav1.Condition{Type: hostpathv1.ConditionDefined, Status: metav1.ConditionFalse,
		Reason: reason, Message: "failed", LastTransitionTime: metav1.NewTime(t0)}
	if !next.IsZero() {
		n := metav1.NewTime(next)
		d.Status.NextTryTime = &n
	}
	return d
}

// changed returns def changed by change.
func changed(def *hostpathv1.HostDefinition, change func(d *hostpathv1.HostDefinition)) *hostpathv1.HostDefinition {
	change(def)
	return def
}

// Changes to the healthy facts.
var (
	noManagerPod     = func(in *Facts) { in.ManagerPods = nil }
	managerNotReady  = func(in *Facts) { in.ManagerPods[0].Status.Conditions[0].Status = v1.ConditionFalse }
	newManagerPod    = func(in *Facts) { in.ManagerPods[0].UID = "uid-new" }
	nodeDeleted      = func(in *Facts) { in.Node = nil }
	noClass          = func(in *Facts) { in.PoolNamed = false }
	managerOff       = func(in *Facts) { in.Node.Labels[managerLabel] = "false" }
	at               = func(t time.Time) func(in *Facts) { return func(in *Facts) { in.Now = t } }
	taint            = func(effect v1.TaintEffect) func(in *Facts) { return taintKey("example.com/maintenance", effect) }
	nodeAvoids       = func(in *Facts) { in.Node.Labels[hostpathv1.AvoidDeletionLabel] = "true" }
	managerTerminate = func(in *Facts) {
		t := metav1.NewTime(t0)
		in.ManagerPods[0].DeletionTimestamp = &t
	}
	retryAnnotated = func(d *hostpathv1.HostDefinition) {
		d.Annotations = map[string]string{hostpathv1.RetryAnnotation: "again"}
	}
	definitionAvoids = func(d *hostpathv1.HostDefinition) {
		d.Labels = map[string]string{hostpathv1.AvoidDeletionLabel: "true"}
	}
)

func taintKey(key string, effect v1.TaintEffect) func(in *Facts) {
	return func(in *Facts) { in.Node.Spec.Taints = append(in.Node.Spec.Taints, v1.Taint{Key: key, Effect: effect}) }
}

// walk decides the steps of a sync as Sync does, applying ActCreate and
// ActCopyLabel to the facts, and returns the actions, the facts and the
// last step.
func walk(cfg Config, in Facts) ([]Action, Facts, Step) {
	var actions []Action
	for range 3 {
		step := NextStep(cfg, in)
		actions = append(actions, step.Action)
		switch step.Action {
		case ActCreate:
			in.Definition = &hostpathv1.HostDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.Name(in.Key.Node, in.Key.Pool)},
				Spec:       hostpathv1.HostDefinitionSpec{NodeName: in.Key.Node, Pool: in.Key.Pool},
			}
		case ActCopyLabel:
			d := in.Definition.DeepCopy()
			d.Labels = map[string]string{hostpathv1.AvoidDeletionLabel: step.Label}
			in.Definition = d
		default:
			return actions, in, step
		}
	}
	return actions, in, Step{}
}

// settle returns the phase and tries after step with outcome fails (for
// ActTry a *tryError, for ActUndefine the delete's error; nil succeeds),
// and when the key is synced again.
func settle(t *testing.T, cfg Config, in Facts, step Step, fails error) (hostpathv1.Phase, int32, time.Duration) {
	t.Helper()
	switch step.Action {
	case ActTry:
		st := step.Status
		tried := metav1.NewTime(in.Now)
		st.LastTryTime = &tried
		if fails == nil {
			st = definedStatus(st, "defined", in.Now)
			return st.Phase, st.Tries, 0
		}
		var te *tryError
		if !errors.As(fails, &te) {
			t.Fatalf("a try fails with a *tryError, not %v", fails)
		}
		st, wait := failedStatus(cfg, st, te, in.Now)
		return st.Phase, st.Tries, wait
	case ActUndefine:
		if fails == nil {
			return none, 0, 0
		}
		st, wait := undefineFailedStatus(cfg, step.Status, fails, in.Now)
		return st.Phase, st.Tries, wait
	case ActWaitForManager:
		return step.Status.Phase, step.Status.Tries, step.After
	}
	if in.Definition == nil {
		return none, 0, step.After
	}
	return in.Definition.Status.Phase, in.Definition.Status.Tries, step.After
}

var (
	errManager = &tryError{reason: ReasonManagerFailed, message: "connection refused"}
	errClone   = &tryError{reason: ReasonClonedHost, message: "a clone", final: true}
	errDelete  = errors.New("etcdserver: request timed out")
)

// TestNextStep walks every phase transition of the design's table (and the
// waits between them) through NextStep, and through the outcome of the try
// or undefine it decides (definedStatus, failedStatus,
// undefineFailedStatus).
func TestNextStep(t *testing.T) {
	ready := func() *hostpathv1.HostDefinition {
		return readyDefinition("node-1", hostpathv1.DefaultPool, t0.Add(-time.Hour))
	}
	waitingMsg := `no manager pod on node "node-1" yet: waiting for the DaemonSet hostpath-manager to start one`
	tests := []struct {
		name   string
		def    *hostpathv1.HostDefinition
		facts  []func(in *Facts)
		config func(cfg *Config)
		// want are the actions of the sync.
		want []Action
		// fails is the outcome of the last step's try or undefine; nil
		// succeeds.
		fails error
		// wantPhase and wantTries are the definition's after the sync;
		// wantAfter is the backoff after a failure, or Step.After.
		wantPhase hostpathv1.Phase
		wantTries int32
		wantAfter time.Duration
		check     func(t *testing.T, step Step)
	}{
		// A new node.
		{name: "new node: created, tried, Ready", want: []Action{ActCreate, ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "new node, try fails: PendingForCreation, next try after the initial backoff",
			want: []Action{ActCreate, ActTry}, fails: errManager,
			wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 1, wantAfter: 10 * time.Second},
		{name: "new node, a cloned host: Error at once", want: []Action{ActCreate, ActTry}, fails: errClone,
			wantPhase: hostpathv1.PhaseError, wantTries: 1},
		{name: "new node, no manager pod yet: PendingForCreation, no try counted", facts: fs(noManagerPod),
			want: []Action{ActCreate, ActWaitForManager}, wantPhase: hostpathv1.PhasePendingForCreation,
			check: func(t *testing.T, step Step) {
				if step.Message != waitingMsg {
					t.Errorf("message %q, want %q", step.Message, waitingMsg)
				}
			}},
		{name: "new node, manager pod not Ready: a try without a pod to call", facts: fs(managerNotReady),
			want: []Action{ActCreate, ActTry}, fails: &tryError{reason: ReasonManagerNotReady},
			wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 1, wantAfter: 10 * time.Second,
			check: func(t *testing.T, step Step) {
				if step.Pod != nil {
					t.Errorf("the try calls pod %s, want none", step.Pod.Name)
				}
			}},
		{name: "new node with the avoid-deletion label: labelled, then tried", facts: fs(nodeAvoids),
			want: []Action{ActCreate, ActCopyLabel, ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "new node the DaemonSet does not start a pod on (NoSchedule taint), no manager pod",
			facts: fs(taint(v1.TaintEffectNoSchedule), noManagerPod), want: []Action{ActNothing}, wantPhase: none},
		{name: "new node with a NoSchedule taint added after its manager pod started: created",
			facts: fs(taint(v1.TaintEffectNoSchedule)), want: []Action{ActCreate, ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "new node labelled hostpath.dev/manager=false, its manager pod not deleted yet: not created",
			facts: fs(managerOff), want: []Action{ActNothing}, wantPhase: none},
		{name: "new node with an untolerated NoExecute taint, its pod not evicted yet: not created",
			facts: fs(taint(v1.TaintEffectNoExecute)), want: []Action{ActNothing}, wantPhase: none},
		{name: "new node, no class names the pool: not created", facts: fs(noClass), want: []Action{ActNothing}, wantPhase: none},
		{name: "new node, no manager DaemonSet: nothing decided", facts: fs(func(in *Facts) { in.DaemonSet = nil }),
			want: []Action{ActNothing}, wantPhase: none},

		// PendingForCreation.
		{name: "PendingForCreation before its next try: waits for it",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 1, ReasonManagerFailed, now.Add(5*time.Second)),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 1, wantAfter: 5 * time.Second},
		{name: "PendingForCreation before its next try, a new manager pod serves: tried at once",
			def:   inPhase(hostpathv1.PhasePendingForCreation, 1, ReasonManagerFailed, now.Add(5*time.Second)),
			facts: fs(newManagerPod), want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "PendingForCreation, try 2 fails: the backoff doubles",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 1, ReasonManagerFailed, now),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 2, wantAfter: 20 * time.Second},
		{name: "PendingForCreation, try 3 fails",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 2, ReasonManagerFailed, now),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 3, wantAfter: 40 * time.Second},
		{name: "PendingForCreation, try 4 fails: the backoff stays at its maximum",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 3, ReasonManagerFailed, now),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 4, wantAfter: 40 * time.Second},
		{name: "PendingForCreation, the last try fails: Error",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 4, ReasonManagerFailed, now),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "PendingForCreation, a try defines it: Ready",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 3, ReasonManagerFailed, now.Add(-time.Second)),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "PendingForCreation, a clone: Error at once",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 1, ReasonManagerFailed, now),
			want: []Action{ActTry}, fails: errClone, wantPhase: hostpathv1.PhaseError, wantTries: 2},
		{name: "PendingForCreation waiting for a manager pod, still none: nothing written",
			def: changed(inPhase(hostpathv1.PhasePendingForCreation, 0, ReasonManagerNotReady, time.Time{}), func(d *hostpathv1.HostDefinition) {
				d.Status.Conditions[0].Message = waitingMsg
			}),
			facts: fs(noManagerPod), want: []Action{ActNothing}, wantPhase: hostpathv1.PhasePendingForCreation},
		{name: "PendingForCreation waiting for a manager pod, one serves: tried",
			def:  inPhase(hostpathv1.PhasePendingForCreation, 0, ReasonManagerNotReady, time.Time{}),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},

		// Ready.
		{name: "Ready, re-verify not due: waits for it", def: ready(),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "Ready, re-verify due: verified, Ready", def: ready(), facts: fs(at(t0.Add(10 * time.Minute))),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, re-verify fails: PendingForCreation", def: ready(), facts: fs(at(t0.Add(10 * time.Minute))),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 1, wantAfter: 10 * time.Second},
		{name: "Ready, re-verify period 0: verified only on changes", def: ready(), facts: fs(at(t0.Add(time.Hour))),
			config: func(cfg *Config) { cfg.ReverifyPeriod = 0 }, want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, a new manager pod (restart, rolling update, reboot): verified at once", def: ready(), facts: fs(newManagerPod),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady,
			check: func(t *testing.T, step Step) {
				if step.Pod == nil || step.Pod.UID != "uid-new" {
					t.Errorf("the try calls %v, want the new pod", step.Pod)
				}
			}},
		{name: "Ready, its manager pod Ready again since the last try (a reboot keeps the pod): verified", def: ready(),
			facts: fs(func(in *Facts) {
				in.ManagerPods[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Second))
			}),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, its manager pod Ready since before the last try: waits", def: ready(),
			facts: fs(func(in *Facts) {
				in.ManagerPods[0].Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Second))
			}),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "Ready, a multihost volume does not list the node: verified (backfill)", def: ready(),
			facts: fs(func(in *Facts) { in.Unlisted = true }), want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, manager pod not Ready (crash, kubelet restart), a verify overdue: stays Ready", def: ready(),
			facts: fs(managerNotReady, at(t0.Add(time.Hour)), func(in *Facts) { in.Unlisted = true }),
			want:  []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, manager pod terminating (rolling update): stays Ready", def: ready(), facts: fs(managerTerminate, newManagerPod),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, no manager pod: stays Ready", def: ready(), facts: fs(noManagerPod, at(t0.Add(time.Hour))),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, a new manager pod not Ready yet: stays Ready", def: ready(), facts: fs(newManagerPod, managerNotReady),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},
		{name: "Ready, retry annotation: verified, stays Ready", def: changed(ready(), retryAnnotated),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady,
			check: func(t *testing.T, step Step) {
				if !step.Retry || step.Status.Retry != "again" || step.Status.Phase != hostpathv1.PhaseReady {
					t.Errorf("step %+v, want a retry recorded, from Ready", step)
				}
			}},

		// Not leaving.
		{name: "cordoned: stays", def: ready(), facts: fs(func(in *Facts) { in.Node.Spec.Unschedulable = true },
			taintKey(v1.TaintNodeUnschedulable, v1.TaintEffectNoSchedule)),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "NotReady: stays", def: ready(), facts: fs(managerNotReady,
			taintKey(v1.TaintNodeNotReady, v1.TaintEffectNoSchedule), taintKey(v1.TaintNodeNotReady, v1.TaintEffectNoExecute)),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},
		{name: "unreachable: stays", def: ready(), facts: fs(
			taintKey(v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule), taintKey(v1.TaintNodeUnreachable, v1.TaintEffectNoExecute)),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "an untolerated NoSchedule taint: stays", def: ready(), facts: fs(taint(v1.TaintEffectNoSchedule)),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "no manager DaemonSet: nothing decided", def: ready(), facts: fs(func(in *Facts) { in.DaemonSet = nil }, managerOff),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseReady},

		// Leaving.
		{name: "Node deleted: undefined", def: ready(), facts: fs(nodeDeleted, noManagerPod), want: []Action{ActUndefine}, wantPhase: none,
			check: reasonIs(ReasonNodeDeleted)},
		{name: "no class names the pool: undefined", def: ready(), facts: fs(noClass), want: []Action{ActUndefine}, wantPhase: none,
			check: reasonIs(ReasonNoClass)},
		{name: "relabelled hostpath.dev/manager=false: undefined", def: ready(), facts: fs(managerOff), want: []Action{ActUndefine}, wantPhase: none,
			check: reasonIs("NodeAffinity")},
		{name: "an untolerated NoExecute taint: undefined", def: ready(), facts: fs(taint(v1.TaintEffectNoExecute)),
			want: []Action{ActUndefine}, wantPhase: none, check: reasonIs("Taint")},
		{name: "Error (define given up), the manager undeployed: undefined (recovery)", def: inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}),
			facts: fs(managerOff, noManagerPod), want: []Action{ActUndefine}, wantPhase: none},
		{name: "PendingForCreation, the Node deleted: undefined", def: inPhase(hostpathv1.PhasePendingForCreation, 2, ReasonManagerFailed, now.Add(time.Minute)),
			facts: fs(nodeDeleted), want: []Action{ActUndefine}, wantPhase: none},
		{name: "--allow-delete=false: kept, UndefineBlocked", def: ready(), facts: fs(nodeDeleted),
			config: func(cfg *Config) { cfg.AllowDelete = false },
			want:   []Action{ActBlockUndefine}, wantPhase: hostpathv1.PhaseReady, check: reasonIs(ReasonAllowDeleteFalse)},
		{name: "the avoid-deletion label on the node: kept, UndefineBlocked", def: changed(ready(), definitionAvoids), facts: fs(nodeAvoids, managerOff),
			want: []Action{ActBlockUndefine}, wantPhase: hostpathv1.PhaseReady, check: reasonIs(ReasonAvoidDeletion)},
		{name: "the avoid-deletion label copied onto the definition, the Node deleted: kept", def: changed(ready(), definitionAvoids),
			facts: fs(nodeDeleted), want: []Action{ActBlockUndefine}, wantPhase: hostpathv1.PhaseReady, check: reasonIs(ReasonAvoidDeletion)},
		{name: "the avoid-deletion label not true: undefined", def: changed(ready(), func(d *hostpathv1.HostDefinition) {
			d.Labels = map[string]string{hostpathv1.AvoidDeletionLabel: "false"}
		}), facts: fs(nodeDeleted), want: []Action{ActUndefine}, wantPhase: none},
		{name: "undefine fails: PendingForDeletion, next try after the initial backoff", def: ready(), facts: fs(nodeDeleted),
			want: []Action{ActUndefine}, fails: errDelete, wantPhase: hostpathv1.PhasePendingForDeletion, wantTries: 1, wantAfter: 10 * time.Second},
		{name: "undefine fails in Error (define given up): a round of its own from try 1",
			def:   inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}),
			facts: fs(nodeDeleted), want: []Action{ActUndefine}, fails: errDelete,
			wantPhase: hostpathv1.PhasePendingForDeletion, wantTries: 1, wantAfter: 10 * time.Second},
		{name: "PendingForDeletion before its next try: waits for it",
			def:   inPhase(hostpathv1.PhasePendingForDeletion, 1, ReasonUndefineFailed, now.Add(3*time.Second)),
			facts: fs(nodeDeleted), want: []Action{ActNothing}, wantPhase: hostpathv1.PhasePendingForDeletion, wantTries: 1, wantAfter: 3 * time.Second},
		{name: "PendingForDeletion, try 2 fails: the backoff doubles",
			def:   inPhase(hostpathv1.PhasePendingForDeletion, 1, ReasonUndefineFailed, now),
			facts: fs(nodeDeleted), want: []Action{ActUndefine}, fails: errDelete,
			wantPhase: hostpathv1.PhasePendingForDeletion, wantTries: 2, wantAfter: 20 * time.Second},
		{name: "PendingForDeletion, the last try fails: Error",
			def:   inPhase(hostpathv1.PhasePendingForDeletion, 4, ReasonUndefineFailed, now),
			facts: fs(nodeDeleted), want: []Action{ActUndefine}, fails: errDelete, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "PendingForDeletion, a try deletes it",
			def:   inPhase(hostpathv1.PhasePendingForDeletion, 2, ReasonUndefineFailed, now),
			facts: fs(nodeDeleted), want: []Action{ActUndefine}, wantPhase: none},
		{name: "Error after the undefine tries: no more",
			def:   inPhase(hostpathv1.PhaseError, 5, ReasonUndefineFailed, time.Time{}),
			facts: fs(nodeDeleted, at(t0.Add(time.Hour))), want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "Error after the undefine tries, retry annotation: a new round of undefine tries",
			def:   changed(inPhase(hostpathv1.PhaseError, 5, ReasonUndefineFailed, time.Time{}), retryAnnotated),
			facts: fs(nodeDeleted), want: []Action{ActUndefine}, fails: errDelete,
			wantPhase: hostpathv1.PhasePendingForDeletion, wantTries: 1, wantAfter: 10 * time.Second,
			check: func(t *testing.T, step Step) {
				if step.Status.Retry != "again" || step.Status.Tries != 0 {
					t.Errorf("undefine from tries %d, retry %q; want 0, again", step.Status.Tries, step.Status.Retry)
				}
			}},
		{name: "PendingForDeletion, the node wanted again: a new round of define tries",
			def:  inPhase(hostpathv1.PhasePendingForDeletion, 2, ReasonUndefineFailed, now.Add(time.Minute)),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady,
			check: func(t *testing.T, step Step) {
				if step.Status.Phase != hostpathv1.PhasePendingForCreation || step.Status.Tries != 0 || step.Status.NextTryTime != nil {
					t.Errorf("try from %q, tries %d, next %v; want a new round", step.Status.Phase, step.Status.Tries, step.Status.NextTryTime)
				}
			}},
		{name: "PendingForDeletion, the node wanted again, the try fails: PendingForCreation, try 1",
			def:  inPhase(hostpathv1.PhasePendingForDeletion, 2, ReasonUndefineFailed, now.Add(time.Minute)),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 1, wantAfter: 10 * time.Second},
		{name: "Error after the undefine tries, the node wanted again: a new round of define tries",
			def:  inPhase(hostpathv1.PhaseError, 5, ReasonUndefineFailed, time.Time{}),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},

		// Error.
		{name: "Error: no try, however long", def: inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}),
			facts: fs(at(t0.Add(24 * time.Hour))), want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "Error, retry annotation: a new round, Ready",
			def:  changed(inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}), retryAnnotated),
			want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady,
			check: func(t *testing.T, step Step) {
				if !step.Retry || step.Status.Retry != "again" || step.Status.Tries != 0 {
					t.Errorf("step %+v, want a new round with the retry recorded", step)
				}
			}},
		{name: "Error, retry annotation, the try fails: try 1 of the new round",
			def:  changed(inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}), retryAnnotated),
			want: []Action{ActTry}, fails: errManager, wantPhase: hostpathv1.PhasePendingForCreation, wantTries: 1, wantAfter: 10 * time.Second},
		{name: "Error, retry annotation, no manager pod: waits for one",
			def:   changed(inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}), retryAnnotated),
			facts: fs(noManagerPod), want: []Action{ActWaitForManager}, wantPhase: hostpathv1.PhasePendingForCreation},
		{name: "Error (ManagerNotReady), a new manager pod serves: a new round",
			def:   inPhase(hostpathv1.PhaseError, 5, ReasonManagerNotReady, time.Time{}),
			facts: fs(newManagerPod), want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "Error (ManagerFailed), a new manager pod serves: a new round",
			def:   inPhase(hostpathv1.PhaseError, 5, ReasonManagerFailed, time.Time{}),
			facts: fs(newManagerPod), want: []Action{ActTry}, wantPhase: hostpathv1.PhaseReady},
		{name: "Error (ManagerFailed), the same manager pod serves: stays",
			def:  inPhase(hostpathv1.PhaseError, 5, ReasonManagerFailed, time.Time{}),
			want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "Error (ManagerFailed), a new manager pod not Ready: stays",
			def:   inPhase(hostpathv1.PhaseError, 5, ReasonManagerFailed, time.Time{}),
			facts: fs(newManagerPod, managerNotReady), want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "Error (InsufficientSpace), a new manager pod serves: stays",
			def:   inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}),
			facts: fs(newManagerPod), want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseError, wantTries: 5},
		{name: "Error (ClonedHost), a new manager pod serves: stays",
			def:   inPhase(hostpathv1.PhaseError, 1, ReasonClonedHost, time.Time{}),
			facts: fs(newManagerPod), want: []Action{ActNothing}, wantPhase: hostpathv1.PhaseError, wantTries: 1},

		// The avoid-deletion label and the UndefineBlocked condition.
		{name: "the node got the avoid-deletion label: copied", def: ready(), facts: fs(nodeAvoids),
			want: []Action{ActCopyLabel, ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "the node lost the avoid-deletion label: removed", def: changed(ready(), definitionAvoids),
			want: []Action{ActCopyLabel, ActNothing}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "UndefineBlocked, the node wanted again: the condition goes",
			def: changed(ready(), func(d *hostpathv1.HostDefinition) {
				d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: hostpathv1.ConditionUndefineBlocked, Status: metav1.ConditionTrue,
					Reason: ReasonAllowDeleteFalse, Message: "kept"})
			}),
			want: []Action{ActClearBlocked}, wantPhase: hostpathv1.PhaseReady, wantAfter: 9 * time.Minute},
		{name: "UndefineBlocked in Error, the node wanted again: the condition goes",
			def: changed(inPhase(hostpathv1.PhaseError, 5, ReasonInsufficientSpace, time.Time{}), func(d *hostpathv1.HostDefinition) {
				d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: hostpathv1.ConditionUndefineBlocked, Status: metav1.ConditionTrue,
					Reason: ReasonAllowDeleteFalse, Message: "kept"})
			}),
			want: []Action{ActClearBlocked}, wantPhase: hostpathv1.PhaseError, wantTries: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.config != nil {
				tc.config(&cfg)
			}
			in := healthy(tc.def)
			for _, change := range tc.facts {
				change(&in)
			}
			actions, in, step := walk(cfg, in)
			if !slices.Equal(actions, tc.want) {
				t.Fatalf("actions %q, want %q (step %+v)", actions, tc.want, step)
			}
			phase, tries, after := settle(t, cfg, in, step, tc.fails)
			if phase != tc.wantPhase || tries != tc.wantTries || after != tc.wantAfter {
				t.Errorf("after the sync: phase %q, tries %d, next sync in %s; want %q, %d, %s",
					phase, tries, after, tc.wantPhase, tc.wantTries, tc.wantAfter)
			}
			if tc.check != nil {
				tc.check(t, step)
			}
		})
	}
}

// fs lists changes to the facts.
func fs(changes ...func(in *Facts)) []func(in *Facts) { return changes }

// reasonIs checks the reason of a step.
func reasonIs(reason string) func(t *testing.T, step Step) {
	return func(t *testing.T, step Step) {
		t.Helper()
		if step.Reason != reason {
			t.Errorf("reason %q (%s), want %q", step.Reason, step.Message, reason)
		}
	}
}

// A guard's UndefineBlocked condition is recorded once, and again when its
// reason changes; the label guard wins only when allowDelete lets deletes
// through.
func TestNextStepBlockedOnce(t *testing.T) {
	cfg := testConfig()
	cfg.AllowDelete = false
	in := healthy(changed(readyDefinition("node-1", hostpathv1.DefaultPool, t0.Add(-time.Hour)), definitionAvoids))
	in.Node = nil
	step := NextStep(cfg, in)
	if step.Action != ActBlockUndefine || step.Reason != ReasonAllowDeleteFalse ||
		!strings.Contains(step.Message, "Node node-1 left pool default (NodeDeleted") || !strings.Contains(step.Message, "--allow-delete=false") {
		t.Fatalf("step %+v, want UndefineBlocked by --allow-delete=false", step)
	}
	d := in.Definition.DeepCopy()
	setCondition(&d.Status, hostpathv1.ConditionUndefineBlocked, metav1.ConditionTrue, step.Reason, step.Message, now)
	in.Definition = d
	if again := NextStep(cfg, in); again.Action != ActNothing {
		t.Errorf("recorded already: step %+v, want nothing", again)
	}
	cfg.AllowDelete = true
	if next := NextStep(cfg, in); next.Action != ActBlockUndefine || next.Reason != ReasonAvoidDeletion {
		t.Errorf("with --allow-delete: step %+v, want UndefineBlocked by the label", next)
	}
}

// NextStep decides from the facts alone: it changes none of them.
func TestNextStepChangesNothing(t *testing.T) {
	def := inPhase(hostpathv1.PhasePendingForCreation, 2, ReasonManagerFailed, now)
	def.Annotations = map[string]string{hostpathv1.RetryAnnotation: "again"}
	in := healthy(def)
	before := in.Definition.DeepCopy()
	step := NextStep(testConfig(), in)
	if step.Action != ActTry {
		t.Fatalf("step %+v, want a try", step)
	}
	setCondition(&step.Status, hostpathv1.ConditionDefined, metav1.ConditionTrue, ReasonDefined, "changed", now)
	if in.Definition.Status.Tries != before.Status.Tries || in.Definition.Status.Retry != before.Status.Retry ||
		in.Definition.Status.Conditions[0] != before.Status.Conditions[0] {
		t.Errorf("the definition changed: %+v, was %+v", in.Definition.Status, before.Status)
	}
}

// The pods on the node a try calls: a serving one, not a terminating one,
// whatever their order.
func TestLiveManagerPod(t *testing.T) {
	pod := func(name string, change func(p *v1.Pod)) *v1.Pod {
		p := managerPod("node-1")
		p.Name, p.UID = name, types.UID(name)
		change(p)
		return p
	}
	terminating := pod("old", func(p *v1.Pod) { t := metav1.NewTime(t0); p.DeletionTimestamp = &t })
	starting := pod("new", func(p *v1.Pod) { p.Status.PodIP, p.Status.Conditions = "", nil })
	serving := pod("serving", func(*v1.Pod) {})
	for _, tc := range []struct {
		name               string
		pods               []*v1.Pod
		wantLive, wantServ string
	}{
		{name: "none"},
		{name: "terminating only", pods: []*v1.Pod{terminating}},
		{name: "rolling update, new pod starting", pods: []*v1.Pod{terminating, starting}, wantLive: "new"},
		{name: "rolling update done", pods: []*v1.Pod{terminating, serving}, wantLive: "serving", wantServ: "serving"},
		{name: "surge: two live pods", pods: []*v1.Pod{starting, serving}, wantLive: "new", wantServ: "serving"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := func(p *v1.Pod) string {
				if p == nil {
					return ""
				}
				return p.Name
			}
			if got := name(liveManagerPod(tc.pods, false)); got != tc.wantLive {
				t.Errorf("live pod %q, want %q", got, tc.wantLive)
			}
			if got := name(liveManagerPod(tc.pods, true)); got != tc.wantServ {
				t.Errorf("serving pod %q, want %q", got, tc.wantServ)
			}
		})
	}
}

// The backoff of a round: InitialBackoff, doubled after each failure, at
// most MaxBackoff.
func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		initial, max time.Duration
		want         []time.Duration
	}{
		{initial: 10 * time.Second, max: 40 * time.Second, want: []time.Duration{10e9, 20e9, 40e9, 40e9, 40e9}},
		{initial: 10 * time.Second, max: 30 * time.Second, want: []time.Duration{10e9, 20e9, 30e9, 30e9}},
		{initial: time.Second, max: time.Second, want: []time.Duration{1e9, 1e9, 1e9}},
		{initial: 2 * time.Second, max: 5 * time.Minute, want: []time.Duration{2e9, 4e9, 8e9, 16e9, 32e9, 64e9, 128e9, 256e9, 300e9, 300e9}},
	} {
		cfg := Config{InitialBackoff: tc.initial, MaxBackoff: tc.max}
		var got []time.Duration
		for tries := range int32(len(tc.want)) {
			got = append(got, backoff(cfg, tries+1))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("backoff from %s up to %s: %v, want %v", tc.initial, tc.max, got, tc.want)
		}
	}
}

// The facts of a sync hold the manager pods of the node only: not those of
// another node, another namespace or without the manager's labels.
func TestFactsManagerPods(t *testing.T) {
	f := newStandardFixture(t)
	otherNamespace := managerPod("node-1")
	otherNamespace.Namespace = "elsewhere"
	notManager := managerPod("node-1")
	notManager.Name, notManager.Labels = "something-else", map[string]string{"app": "something-else"}
	f.pods = []*v1.Pod{otherNamespace, notManager, managerPod("node-2")}
	f.newController()

	in, err := f.c.facts(key1)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.ManagerPods) != 0 {
		t.Errorf("manager pods of node-1: %d, want none", len(in.ManagerPods))
	}
	r := f.run(key1)
	expectEvents(t, r, "Normal WaitingForManager")

	f.setObject(podsGVR, f.informers.Pods, managerPod("node-1"))
	if in, err = f.c.facts(key1); err != nil || len(in.ManagerPods) != 1 || in.ManagerPods[0].Namespace != testNamespace {
		t.Errorf("manager pods of node-1: %v, %v; want the one in %s", in.ManagerPods, err, testNamespace)
	}
}
