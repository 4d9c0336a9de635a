package status

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Outcome is what one reconcile concluded about a tenant: the verdict on its objects, a
// terminal refusal, or where its decommission stands. The reconcile records it on the
// scope as it goes; Record derives from it, in one place, every field that summarises
// the tenant: the conditions, the phase, Reconciling and Stalled, and
// observedGeneration. Exactly one of Observed, Refused and Decommission is set; a
// reconcile that concluded nothing (it failed before judging) leaves the status as it
// was.
type Outcome struct {
	// Observed is the verdict on a live tenant's objects (Compute's result).
	Observed *Result
	// Release is the EvaRollout the Observed verdict was computed against: written only
	// with it, so a reconcile that ends early never pairs a new release with an old Ready.
	Release string
	// Refused is a terminal refusal: the tenant cannot progress until its spec or the
	// cluster changes (an invalid spec, a code or namespace someone else holds, a
	// protected tenant asked to go).
	Refused *Refusal
	// Decommission is where the decommission saga stands.
	Decommission *Decommission
	// Settled says the outcome is this generation's final word, so observedGeneration
	// moves to it. False when the reconcile ends in an error it will retry (an apply or
	// publish that failed, a saga step that failed): the generation is not done with.
	Settled bool
}

// Refusal is a terminal refusal of the tenant.
type Refusal struct {
	Reason, Message string
	// Judged says the refusal is the verdict on each of the five conditions too (an
	// invalid spec: nothing of it can be provisioned). Otherwise they are left as last
	// observed: a refusal reads nothing of objects that may be another owner's.
	Judged bool
}

// Decommission is where the decommission saga stands.
type Decommission struct {
	// Done: nothing of the tenant is left in the cluster.
	Done bool
	// Reason and Message say what the saga waits for while it is not done
	// (Decommissioning, DecommissionStepFailed, NamespaceTerminating).
	Reason, Message string
}

// Transition is a condition whose status changed in this reconcile.
type Transition struct {
	Type     string
	From, To metav1.ConditionStatus
}

// Record writes an outcome into the tenant's status and returns the conditions whose
// status changed. Each condition carries the tenant's generation; a transition time
// moves only when its status does; the first time each condition became True since
// provisioning started is kept.
func Record(st *evav1.EvaTenantStatus, o Outcome, generation int64, now metav1.Time) []Transition {
	var ts []Transition
	set := func(ct string, v Verdict) {
		if tr, changed := setCondition(st, ct, v, generation, now); changed {
			ts = append(ts, tr)
		}
	}
	switch {
	case o.Observed != nil:
		for _, ct := range append(append([]string{}, ConditionTypes...), evav1.ConditionReady) {
			set(ct, o.Observed.Verdicts[ct])
		}
		st.Phase, st.Modules, st.Release = o.Observed.Phase, o.Observed.Modules, o.Release
		setProgress(st, o.Observed.Phase, o.Observed.Terminal, o.Observed.Verdicts[evav1.ConditionReady].Message, generation, now)
	case o.Refused != nil:
		v := Verdict{Status: metav1.ConditionFalse, Reason: o.Refused.Reason, Message: o.Refused.Message}
		if o.Refused.Judged {
			for _, ct := range ConditionTypes {
				set(ct, v)
			}
		}
		set(evav1.ConditionReady, v)
		st.Phase = evav1.PhaseFailed
		setProgress(st, evav1.PhaseFailed, &v, "", generation, now)
	case o.Decommission != nil && o.Decommission.Done:
		for _, ct := range ConditionTypes {
			set(ct, Verdict{Status: metav1.ConditionFalse, Reason: ReasonDecommissioned, Message: "tenant decommissioned"})
		}
		// Ready: the desired state (nothing left) is reached, so kstatus, Flux health
		// checks and kubectl wait see a decommissioned tenant as done, not in progress.
		set(evav1.ConditionReady, ok(ReasonDecommissioned, "tenant decommissioned: nothing of it is left in the cluster"))
		st.Phase = evav1.PhaseDecommissioned
		st.Inventory, st.AppliedDigest, st.Modules, st.DecommissionStep = nil, "", nil, ""
		setProgress(st, evav1.PhaseDecommissioned, nil, "", generation, now)
	case o.Decommission != nil:
		d := o.Decommission
		set(evav1.ConditionReady, wait(d.Reason, d.Message))
		st.Phase = evav1.PhaseDecommissioning
		setProgress(st, evav1.PhaseDecommissioning, nil, truncate(d.Message), generation, now)
	default:
		return nil
	}
	if o.Settled {
		st.ObservedGeneration = generation
	}
	return ts
}

// setCondition sets one condition and reports its transition, if its status changed.
func setCondition(st *evav1.EvaTenantStatus, ct string, v Verdict, generation int64, now metav1.Time) (Transition, bool) {
	from := metav1.ConditionUnknown
	if prev := apimeta.FindStatusCondition(st.Conditions, ct); prev != nil {
		from = prev.Status
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ct, Status: v.Status, Reason: v.Reason, Message: v.Message,
		ObservedGeneration: generation, LastTransitionTime: now,
	})
	if v.Status == metav1.ConditionTrue && st.ProvisioningStartedAt != nil {
		if st.FirstTrue == nil {
			st.FirstTrue = map[string]metav1.Time{}
		}
		if _, seen := st.FirstTrue[ct]; !seen {
			st.FirstTrue[ct] = now
		}
	}
	return Transition{Type: ct, From: from, To: v.Status}, from != v.Status
}

// setProgress writes the two conditions kstatus (Flux health checks, `flux`, kubectl
// wait) reads besides Ready: Reconciling True while work is under way (Requested,
// Provisioning, Decommissioning), Stalled True with the terminal verdict's reason when the
// tenant cannot progress without a change (Failed). Neither is present when the tenant is
// Active or Decommissioned.
func setProgress(st *evav1.EvaTenantStatus, phase evav1.Phase, terminal *Verdict, progress string, generation int64, now metav1.Time) {
	set := func(ct, reason, msg string) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ct, Status: metav1.ConditionTrue,
			Reason: reason, Message: msg, ObservedGeneration: generation, LastTransitionTime: now})
	}
	switch {
	case phase == evav1.PhaseFailed && terminal != nil:
		apimeta.RemoveStatusCondition(&st.Conditions, evav1.ConditionReconciling)
		set(evav1.ConditionStalled, terminal.Reason, terminal.Message)
	case phase == evav1.PhaseRequested || phase == evav1.PhaseProvisioning || phase == evav1.PhaseDecommissioning:
		apimeta.RemoveStatusCondition(&st.Conditions, evav1.ConditionStalled)
		set(evav1.ConditionReconciling, ReasonProgressing, progress)
	default:
		apimeta.RemoveStatusCondition(&st.Conditions, evav1.ConditionStalled)
		apimeta.RemoveStatusCondition(&st.Conditions, evav1.ConditionReconciling)
	}
}

// BecameTrue reports whether a condition type turned True among transitions.
func BecameTrue(ts []Transition, condition string) bool {
	for _, t := range ts {
		if t.Type == condition && t.To == metav1.ConditionTrue {
			return true
		}
	}
	return false
}
