package status

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// observed is the outcome of a reconcile that judged what it observed, settled.
func observed(r Result) Outcome { return Outcome{Observed: &r, Settled: true} }

// TestRecordEveryOutcome records each kind of outcome over a tenant that was Active at
// generation 1, now at generation 2, and checks every field Record derives: the phase,
// Ready, Reconciling and Stalled, and observedGeneration. Whatever the outcome, the
// summary fields agree with each other (checkAgree).
func TestRecordEveryOutcome(t *testing.T) {
	active := func() evav1.EvaTenantStatus {
		var st evav1.EvaTenantStatus
		Record(&st, observed(Compute(healthy())), 1, metav1.Now())
		st.Inventory, st.AppliedDigest = []evav1.ObjectRef{{Kind: "Namespace", Name: "eva-tenant-acmeco"}}, "sha256:ab"
		return st
	}
	failing := healthy()
	failing.SeedJob = &JobState{Name: "eva-seed-seeds-1", Failed: true}
	for _, c := range []struct {
		name      string
		outcome   Outcome
		phase     evav1.Phase
		ready     string // Ready's status and reason
		progress  string // "Reconciling", "Stalled" or "" for neither, with its reason
		judged    bool   // the five conditions carry the outcome's reason
		observed  int64
		inventory bool // the inventory is kept
	}{
		{"active", observed(Compute(healthy())), evav1.PhaseActive, "True Ready", "", false, 2, true},
		{"failed dependency", observed(Compute(failing)), evav1.PhaseFailed, "False DependencyFailed", "Stalled SeedJobFailed", false, 2, true},
		{"apply failed, retried", Outcome{Observed: ptr(Compute(healthy()))}, evav1.PhaseActive, "True Ready", "", false, 1, true},
		{"invalid spec", Outcome{Refused: &Refusal{Reason: ReasonInvalidSpec, Message: "bad", Judged: true}, Settled: true},
			evav1.PhaseFailed, "False InvalidSpec", "Stalled InvalidSpec", true, 2, true},
		{"code in use", Outcome{Refused: &Refusal{Reason: ReasonCapsuleCodeInUse, Message: "taken"}, Settled: true},
			evav1.PhaseFailed, "False CapsuleCodeInUse", "Stalled CapsuleCodeInUse", false, 2, true},
		// An Active tenant refused its decommission is Failed, not Active beside Stalled.
		{"deletion protected", Outcome{Refused: &Refusal{Reason: ReasonDeletionProtected, Message: "protected"}, Settled: true},
			evav1.PhaseFailed, "False DeletionProtected", "Stalled DeletionProtected", false, 2, true},
		{"decommissioning", Outcome{Decommission: &Decommission{Reason: ReasonDecommissioning, Message: "waiting for crm"}},
			evav1.PhaseDecommissioning, "False Decommissioning", "Reconciling Progressing", false, 1, true},
		{"decommission step failed", Outcome{Decommission: &Decommission{Reason: ReasonStepFailed, Message: "boom"}},
			evav1.PhaseDecommissioning, "False DecommissionStepFailed", "Reconciling Progressing", false, 1, true},
		{"decommissioned", Outcome{Decommission: &Decommission{Done: true}, Settled: true},
			evav1.PhaseDecommissioned, "True Decommissioned", "", true, 2, false},
		{"nothing concluded", Outcome{}, evav1.PhaseActive, "True Ready", "", false, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := active()
			Record(&st, c.outcome, 2, metav1.Now())
			if st.Phase != c.phase {
				t.Errorf("phase %s, want %s", st.Phase, c.phase)
			}
			if got := conditionSummary(st, evav1.ConditionReady); got != c.ready {
				t.Errorf("Ready %q, want %q", got, c.ready)
			}
			progress := ""
			for _, ct := range []string{evav1.ConditionReconciling, evav1.ConditionStalled} {
				if got := conditionSummary(st, ct); got != "" {
					progress = ct + " " + got[len("True "):]
				}
			}
			if progress != c.progress {
				t.Errorf("progress %q, want %q", progress, c.progress)
			}
			if st.ObservedGeneration != c.observed {
				t.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, c.observed)
			}
			if kept := len(st.Inventory) > 0 && st.AppliedDigest != ""; kept != c.inventory {
				t.Errorf("inventory and digest kept: %t, want %t", kept, c.inventory)
			}
			_, readyReason, _ := cut(c.ready)
			for _, ct := range ConditionTypes {
				if judged := conditionSummary(st, ct) == "False "+readyReason; judged != c.judged && readyReason != ReasonReady {
					t.Errorf("%s: %q, judged by the outcome: %t, want %t", ct, conditionSummary(st, ct), judged, c.judged)
				}
			}
			checkAgree(t, st)
		})
	}
}

// checkAgree checks that the summary fields tell one story: Ready True only in Active
// and Decommissioned; Stalled exactly in Failed; Reconciling exactly while work is under way.
func checkAgree(t *testing.T, st evav1.EvaTenantStatus) {
	t.Helper()
	ready := apimeta.IsStatusConditionTrue(st.Conditions, evav1.ConditionReady)
	stalled := apimeta.IsStatusConditionTrue(st.Conditions, evav1.ConditionStalled)
	reconciling := apimeta.IsStatusConditionTrue(st.Conditions, evav1.ConditionReconciling)
	done := st.Phase == evav1.PhaseActive || st.Phase == evav1.PhaseDecommissioned
	underWay := st.Phase == evav1.PhaseRequested || st.Phase == evav1.PhaseProvisioning || st.Phase == evav1.PhaseDecommissioning
	if ready != done || stalled != (st.Phase == evav1.PhaseFailed) || reconciling != underWay {
		t.Errorf("phase %s with Ready %t, Stalled %t, Reconciling %t", st.Phase, ready, stalled, reconciling)
	}
}

// conditionSummary is a condition's status and reason, "" when it is absent.
func conditionSummary(st evav1.EvaTenantStatus, ct string) string {
	c := apimeta.FindStatusCondition(st.Conditions, ct)
	if c == nil {
		return ""
	}
	return string(c.Status) + " " + c.Reason
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func ptr[T any](v T) *T { return &v }
