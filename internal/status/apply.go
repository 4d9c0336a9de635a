package status

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Transition is a condition whose status changed in this reconcile.
type Transition struct {
	Type     string
	From, To metav1.ConditionStatus
}

// Apply writes a result into the tenant's status: conditions (each with the tenant's
// generation; the transition time moves only when the status does), the phase, the
// modules, and the first time each condition became True. It returns the transitions.
func Apply(st *evav1.EvaTenantStatus, res Result, generation int64, now metav1.Time) []Transition {
	var transitions []Transition
	for _, t := range append(append([]string{}, ConditionTypes...), evav1.ConditionReady) {
		v := res.Verdicts[t]
		prev := apimeta.FindStatusCondition(st.Conditions, t)
		from := metav1.ConditionUnknown
		if prev != nil {
			from = prev.Status
		}
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: v.Status, Reason: v.Reason, Message: v.Message,
			ObservedGeneration: generation, LastTransitionTime: now,
		})
		if from != v.Status {
			transitions = append(transitions, Transition{Type: t, From: from, To: v.Status})
		}
		if v.Status == metav1.ConditionTrue && st.ProvisioningStartedAt != nil {
			if st.FirstTrue == nil {
				st.FirstTrue = map[string]metav1.Time{}
			}
			if _, seen := st.FirstTrue[t]; !seen {
				st.FirstTrue[t] = now
			}
		}
	}
	st.Phase = res.Phase
	st.Modules = res.Modules
	SetProgress(st, res.Phase, res.Terminal, res.Verdicts[evav1.ConditionReady].Message, generation, now)
	return transitions
}

// SetProgress writes the two conditions kstatus (Flux health checks, `flux`, kubectl
// wait) reads besides Ready: Reconciling True while work is under way (Requested,
// Provisioning, Decommissioning), Stalled True with the terminal verdict's reason when the
// tenant cannot progress without a change (Failed). Neither is present when the tenant is
// Active or Decommissioned.
func SetProgress(st *evav1.EvaTenantStatus, phase evav1.Phase, terminal *Verdict, progress string, generation int64, now metav1.Time) {
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
