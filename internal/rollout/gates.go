package rollout

import (
	"fmt"
	"strings"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/safetext"
)

// gates checks the tenants the wave admitted: none Failed on the release, each Ready on
// it within the timeout, none with a backlog over the gate grown since the release
// reached it; it stamps readyAt on those first seen Ready. A failing tenant halts the
// rollout (the failures returned) or, when the rollout's policy allows it and the
// release was judged Ready on another tenant, is given until its deadline and then set
// aside (setAside).
func (p *planner) gates(ws *evav1.WaveStatus) []string {
	var halting []string
	for i := range ws.Updated {
		e := &ws.Updated[i]
		t, live := p.live(*e)
		if !live || e.SetAsideAt != nil {
			continue // deleted, decommissioned or set aside since: nothing to wait for
		}
		if e.Reason = p.unjudged(*e, t); e.Reason != "" {
			continue
		}
		failures, deadline := p.judge(e, t)
		if len(failures) == 0 {
			continue
		}
		why := strings.Join(failures, "; ")
		if !p.mayBeSetAside(e) {
			halting = append(halting, why)
			continue
		}
		if left := deadline.Sub(p.now.Time); left > 0 {
			p.graceNotes[e.Name] = fmt.Sprintf("%s, set aside at %s unless it recovers", why, deadline.UTC().Format(time.RFC3339))
			p.wake(left)
			continue
		}
		e.SetAsideAt, e.Reason = p.now.DeepCopy(), safetext.Limit("set aside: "+why, 300)
		p.events = append(p.events, Event{"Warning", "TenantSetAside", fmt.Sprintf(
			"wave %d: tenant %s set aside, the release going on without it (it was judged Ready on another tenant): %s",
			ws.Wave, t.Code, safetext.Limit(why, 600))})
	}
	return halting
}

// judge lists the gates an admitted tenant fails now, and until when a failing tenant
// may recover before it is set aside: readyTimeout after the release reached it, or
// now for a tenant whose time is up already.
func (p *planner) judge(e *evav1.RolloutTenant, t Tenant) ([]string, time.Time) {
	var failures []string
	timeout := p.readyTimeout(t.Tier)
	reached := p.now.Time
	if e.AdmittedAt != nil {
		reached = e.AdmittedAt.Time
	}
	if e.ReachedAt != nil {
		reached = e.ReachedAt.Time
	}
	deadline := reached.Add(timeout)
	if p.r.Spec.Gates.MaxQueueDepth != nil {
		p.wake(Progress) // a backlog changes no object: look again while the wave lasts
	}
	if p.backlogGrown(*e, t) {
		failures = append(failures, fmt.Sprintf("%s queue depth %d above %d", t.Code, t.QueueDepth, *p.r.Spec.Gates.MaxQueueDepth))
	}
	switch {
	case t.OnRelease && t.Failed && e.AdmittedAt != nil && !t.FailedAt.Before(e.AdmittedAt.Time):
		// Failed since the release reached it: a tenant Failed before (whose status
		// may still say so in the write that records the release) is judged by its
		// timeout instead.
		failures = append(failures, fmt.Sprintf("%s Failed: %s", t.Code, safetext.Limit(t.Message, 200)))
	case t.readyOnRelease():
		if e.ReadyAt == nil {
			e.ReadyAt = p.now.DeepCopy()
		}
	case e.ReadyAt == nil && e.AdmittedAt != nil && t.Pending:
		p.wake(Progress)
	case e.ReadyAt == nil && e.AdmittedAt != nil:
		if e.ReachedAt == nil {
			e.ReachedAt = p.now.DeepCopy()
			deadline = p.now.Add(timeout)
		}
		if left := deadline.Sub(p.now.Time); left <= 0 {
			failures = append(failures, fmt.Sprintf("%s not Ready on the release within %s", t.Code, timeout))
		} else {
			p.wake(left)
		}
	case e.ReadyAt != nil && t.OnRelease && !t.NotReadySince.IsZero():
		// Ready on the release once, not any more: timed again from then.
		since := t.NotReadySince
		if since.Before(e.ReadyAt.Time) {
			since = e.ReadyAt.Time
		}
		if left := timeout - p.now.Sub(since); left <= 0 {
			failures = append(failures, fmt.Sprintf("%s not Ready on the release for more than %s since %s", t.Code, timeout,
				since.UTC().Format(time.RFC3339)))
			deadline = p.now.Time
		} else {
			p.wake(left)
		}
	}
	return failures, deadline
}

// backlogGrown: the tenant is over the queue-depth gate with more messages than when
// the release admitted it (a backlog it had before is not the release's doing).
func (p *planner) backlogGrown(e evav1.RolloutTenant, t Tenant) bool {
	return p.overQueueDepth(t) && (e.AdmittedQueueDepth == nil || t.QueueDepth > uint64(max(*e.AdmittedQueueDepth, 0)))
}

// depthAtAdmission is the tenant's measured backlog to record with its admission (nil
// when not measured).
func depthAtAdmission(t Tenant) *int64 {
	if !t.QueueDepthKnown {
		return nil
	}
	depth := int64(min(t.QueueDepth, uint64(1)<<62))
	return &depth
}

// mayBeSetAside: the rollout's policy sets failing tenants aside, and the release was
// judged Ready on a tenant other than e's, so e's failure is its own, not the release's.
func (p *planner) mayBeSetAside(e *evav1.RolloutTenant) bool {
	return p.r.Spec.Gates.OnTenantFailure != evav1.TenantFailureHalt && p.judgedReady(p.st.Waves, e.Name)
}

// judgedReady: one of the waves' admissions (but the tenant except's) was judged Ready
// on the release: stamped readyAt, still judged, not set aside, its tenant live and
// changed by the release.
func (p *planner) judgedReady(waves []evav1.WaveStatus, except string) bool {
	for _, ws := range waves {
		for _, e := range ws.Updated {
			if t, live := p.live(e); live && !t.Unchanged && e.Name != except && e.ReadyAt != nil && e.SetAsideAt == nil && e.Reason == "" {
				return true
			}
		}
	}
	return false
}
