package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// Argo CD's sync statuses, health statuses and operation phases Eva reads.
const (
	argoSynced      = "Synced"
	argoHealthy     = "Healthy"
	argoDegraded    = "Degraded"
	argoSuspended   = "Suspended"
	argoPhaseFailed = "Failed"
	argoPhaseError  = "Error"
)

// ApplicationKind names Argo CD Applications in messages.
const ApplicationKind = "Application"

// ApplicationDelivery reads the Argo CD Application syncing one of a tenant's folders
// (nil when missing) as a DeliveryState. Ready is True once Argo CD compared the
// Application's current spec, found the live state synced and healthy; otherwise False
// with Argo CD's sync status, health and last operation message. LastAppliedRevision
// is the commit it is synced at (or last synced successfully); the caller decides
// Applied against the published revision.
func ApplicationDelivery(name string, app *argov1.Application) DeliveryState {
	d := DeliveryState{Kind: ApplicationKind, Name: name, Found: app != nil}
	if app == nil {
		return d
	}
	st := app.Status
	switch {
	case st.Sync.Status == argoSynced:
		d.LastAppliedRevision = st.Sync.Revision
	case st.OperationState != nil && st.OperationState.Phase == "Succeeded" && st.OperationState.SyncResult != nil:
		d.LastAppliedRevision = st.OperationState.SyncResult.Revision
	}
	d.Ready = applicationReady(app)
	return d
}

// ApplicationRelease reads a module's Argo CD Application (nil when missing) as a
// ReleaseState, mapping Argo CD's health onto the release verdicts:
//   - Healthy and synced at the chart version: Ready;
//   - Degraded: Stalled with Argo CD's message, so the tenant is Failed with it;
//   - a sync that failed after its retries (operation Failed or Error): Stalled too;
//   - Progressing, Missing, Suspended, Unknown, OutOfSync: not ready yet.
//
// The release is Outdated while the Application in the cluster is not the one the
// tenant renders now (wantDigest, the release's spec digest, differs from its
// annotation) or Argo CD's status is about an older spec of it (comparedTo).
func ApplicationRelease(module, name, version, wantDigest string, app *argov1.Application) ReleaseState {
	r := ReleaseState{Kind: ApplicationKind, Module: module, Name: name, Version: version, Found: app != nil}
	if app == nil {
		return r
	}
	if wantDigest != "" && app.Annotations[tenant.AnnotationSpecDigest] != wantDigest {
		r.Outdated = true
	}
	st := app.Status
	if c := st.Sync.ComparedTo; c == nil || !sameSource(c.Source, app.Spec.Source) {
		r.Outdated = true
	}
	if st.Sync.Status == argoSynced {
		r.HistoryVersion = st.Sync.Revision
	}
	if op := st.OperationState; op != nil && op.SyncResult != nil {
		r.LastAttemptedRevision = op.SyncResult.Revision
	}
	r.Ready = applicationReady(app)
	switch op := st.OperationState; {
	case st.Health.Status == argoDegraded:
		r.Stalled = &metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue, Reason: argoDegraded,
			Message: healthMessage(app)}
	case op != nil && (op.Phase == argoPhaseFailed || op.Phase == argoPhaseError) && st.Sync.Status != argoSynced:
		r.Stalled = &metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "SyncFailed",
			Message: fmt.Sprintf("sync %s after %d retries: %s", op.Phase, op.RetryCount, op.Message)}
	}
	return r
}

// applicationReady makes a Ready condition of an Application's sync status and health.
func applicationReady(app *argov1.Application) *metav1.Condition {
	st := app.Status
	if st.Sync.Status == "" && st.Health.Status == "" {
		return nil // not reconciled yet
	}
	c := &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse}
	switch {
	case st.Sync.Status == argoSynced && st.Health.Status == argoHealthy:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, argoHealthy, "synced at "+st.Sync.Revision+" and healthy"
	case st.Health.Status == argoSuspended:
		c.Reason, c.Message = argoSuspended, firstNonEmpty(st.Health.Message, "suspended")
	case st.Sync.Status != argoSynced:
		c.Reason = firstNonEmpty(st.Sync.Status, "Unknown")
		c.Message = fmt.Sprintf("sync %s, health %s", c.Reason, firstNonEmpty(st.Health.Status, "Unknown"))
		if m := operationMessage(app); m != "" {
			c.Message += ": " + m
		}
	default:
		c.Reason = firstNonEmpty(st.Health.Status, "Unknown")
		c.Message = healthMessage(app)
	}
	return c
}

// healthMessage says why an Application has the health it has: the messages of its
// resources in that health (Argo CD 3 keeps the Application's own health message
// empty), or, when Argo CD keeps resource health out of the Application, where to
// find them.
func healthMessage(app *argov1.Application) string {
	h := app.Status.Health
	msg := "health " + firstNonEmpty(h.Status, "Unknown")
	var reasons []string
	more := 0
	for _, r := range app.Status.Resources {
		if r.Health == nil || r.Health.Status != h.Status {
			continue
		}
		if len(reasons) == maxHealthReasons {
			more++
			continue
		}
		reason := r.Kind + " " + r.Name
		if r.Namespace != "" {
			reason = r.Kind + " " + r.Namespace + "/" + r.Name
		}
		if r.Health.Message != "" {
			reason += ": " + r.Health.Message
		}
		reasons = append(reasons, reason)
	}
	if more > 0 {
		reasons = append(reasons, fmt.Sprintf("and %d more", more))
	}
	switch {
	case len(reasons) > 0:
		return strings.Join(reasons, "; ")
	case h.Message != "":
		return h.Message // Argo CD before 3.0
	}
	if conds := conditionsMessage(app); conds != "" {
		msg += ": " + conds
	}
	if app.Status.ResourceHealthSource == "appTree" && h.Status != argoHealthy {
		msg += " (Argo CD keeps resource health out of the Application: set controller.resource.health.persist " +
			"to true in argocd-cmd-params-cm for the reason here, or run argocd app get " + app.Name + ")"
	}
	return msg
}

// maxHealthReasons bounds the resources a health message names, so a large module's
// message stays well within a condition's 32 KiB.
const maxHealthReasons = 5

// operationMessage is the last operation's message and the Application's error
// conditions (a source that cannot be read, a spec Argo CD refuses).
func operationMessage(app *argov1.Application) string {
	var msg string
	if op := app.Status.OperationState; op != nil {
		msg = op.Message
	}
	if conds := conditionsMessage(app); conds != "" {
		if msg != "" {
			msg += "; "
		}
		msg += conds
	}
	return msg
}

// conditionsMessage is the Application's error conditions (a source that cannot be
// read, a spec Argo CD refuses).
func conditionsMessage(app *argov1.Application) string {
	var msg string
	for _, c := range app.Status.Conditions {
		if msg != "" {
			msg += "; "
		}
		msg += c.Type + ": " + c.Message
	}
	return msg
}

// sameSource reports whether Argo CD compared the source the Application has now.
func sameSource(compared, spec *argov1.ApplicationSource) bool {
	if compared == nil || spec == nil {
		return compared == spec
	}
	a, errA := json.Marshal(normalizedSource(compared))
	b, errB := json.Marshal(normalizedSource(spec))
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// normalizedSource drops the formatting of inline values (Argo CD stores them
// re-encoded) so two equal sources compare equal.
func normalizedSource(s *argov1.ApplicationSource) *argov1.ApplicationSource {
	c := s.DeepCopy()
	if c.Helm != nil && c.Helm.ValuesObject != nil {
		var v any
		if err := json.Unmarshal(c.Helm.ValuesObject.Raw, &v); err == nil {
			c.Helm.ValuesObject.Raw, _ = json.Marshal(v)
		}
	}
	return c
}
