package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/observe"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
)

// GitOps configures GitOps mode: tenants are published to git (or OCI) for Flux to
// apply, instead of being applied by the operator.
type GitOps struct {
	Batcher *publish.Batcher
	// MinInterval is the least time between two publishes of one tenant's changes: a
	// change arriving sooner waits, and the changes meanwhile coalesce into one publish.
	// A tenant changing without end (a patch loop) then costs the shared repository one
	// commit per interval, not one per batch window. Zero publishes every change.
	MinInterval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Revisions reads what the branch or tag holds of each tenant: whether what Flux
	// applied holds a tenant's publish, and whether what is published still does.
	Revisions publish.Revisions
	// HeadMaxAge is how long one read of the published head serves every tenant's check
	// (30 s when zero); a publish of this process moves it at once.
	HeadMaxAge time.Duration

	// A reconcile submits its tenant's files and returns; the batch's outcome waits in
	// publications until the tenant's next reconcile (woken through wake) collects it.
	mu           sync.Mutex
	publications map[types.UID]*publication
	// submitted is each tenant's last submission, kept when it failed (a failed
	// publication is dropped from publications so that it is submitted again), so the
	// publish interval holds across failures too.
	submitted map[types.UID]submission
	wakeOnce  sync.Once
	wake      chan event.GenericEvent

	headMu     sync.Mutex
	head       string
	headReadAt time.Time
}

// submission is when a tenant's files of a digest were last submitted.
type submission struct {
	digest string
	at     time.Time
}

// publication is the last publish this process submitted for a tenant.
type publication struct {
	digest   string
	done     bool
	revision string
	err      error
}

// wakeups is the channel a finished publish wakes its tenant through (a controller
// source).
func (g *GitOps) wakeups() chan event.GenericEvent {
	g.wakeOnce.Do(func() { g.wake = make(chan event.GenericEvent, 1024) })
	return g.wake
}

// publish submits the tenant's files (digest names them) to the next batch unless the
// same files are already under way, and reports the outcome once that batch was
// published: done false means not yet, and the tenant is reconciled again when it is.
// A failed outcome is handed out once (the next call submits again); a successful one
// stays, as the record of what was last published for the tenant (lastSubmitted).
func (g *GitOps) publish(t *evav1.EvaTenant, digest string, files []render.File) (done bool, revision string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.publications[t.UID]; p != nil && p.digest == digest {
		switch {
		case !p.done:
			return false, "", nil
		case p.err != nil:
			delete(g.publications, t.UID)
		}
		return true, p.revision, p.err
	}
	if g.publications == nil {
		g.publications = map[types.UID]*publication{}
	}
	p := &publication{digest: digest}
	g.publications[t.UID] = p
	if g.submitted == nil {
		g.submitted = map[types.UID]submission{}
	}
	g.submitted[t.UID] = submission{digest: digest, at: g.now()}
	who := &evav1.EvaTenant{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
	wake := g.wakeups()
	// A folder published before owners were recorded is this tenant's to take only if it
	// has published before (its status, which only the operator writes, says so).
	adopt := t.Status.Revision != ""
	g.Batcher.Submit(render.DirName(t.Spec.CapsuleCode), files, adopt, func(revision string, err error) {
		g.mu.Lock()
		p.done, p.revision, p.err = true, revision, err
		g.mu.Unlock()
		if err == nil {
			g.published(revision)
		}
		select {
		case wake <- event.GenericEvent{Object: who}:
		default: // never hold up the publisher; the tenant's periodic requeue covers it
		}
	})
	return false, "", nil
}

// holdBack returns how long a change of the tenant (files of digest) must wait before
// it is published: the rest of MinInterval since this process last submitted another
// digest for it, or zero.
func (g *GitOps) holdBack(uid types.UID, digest string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.submitted[uid]
	if g.MinInterval <= 0 || !ok || last.digest == digest {
		return 0 // a retry of the same files waits for the reconcile's backoff only
	}
	return max(last.at.Add(g.MinInterval).Sub(g.now()), 0)
}

func (g *GitOps) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// lastSubmitted returns the digest this process last submitted for the tenant, if any:
// when it differs from what the tenant's status records as published, the tree may hold
// those other files (a spec changed back, a lifecycle flipped mid-saga).
func (g *GitOps) lastSubmitted(uid types.UID) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.publications[uid]; p != nil {
		return p.digest, true
	}
	return "", false
}

// settled reports whether the tenant's status (digest published as revision) is all
// there is to know of its publishes: this process submitted none since it started, or
// the last it submitted is that one, done. Otherwise publish has an outcome to hand out
// or a submission under way.
func (g *GitOps) settled(uid types.UID, digest, revision string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.publications[uid]
	return p == nil || p.digest == digest && p.done && p.err == nil && p.revision == revision
}

// resubmit drops the tenant's last publication, so that the next publish of the same
// files submits them again (they went missing from the branch or tag).
func (g *GitOps) resubmit(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.publications, uid)
}

// forget drops a decommissioned tenant's record.
func (g *GitOps) forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.publications, uid)
	delete(g.submitted, uid)
}

// sagaDigestPrefix marks the digests of decommission steps among a tenant's submissions.
const sagaDigestPrefix = "saga/"

// stepDigest is how a decommission step's files (of TenantDigest digest) are known among
// a tenant's submissions.
func stepDigest(step evav1.DecommissionStep, digest string) string {
	return sagaDigestPrefix + string(step) + ":" + digest
}

// published records a revision this process published as the head.
func (g *GitOps) published(revision string) {
	g.headMu.Lock()
	defer g.headMu.Unlock()
	g.head, g.headReadAt = revision, g.now()
}

// publishedHead returns the revision published now, read again once HeadMaxAge passed.
func (g *GitOps) publishedHead(ctx context.Context) (string, error) {
	g.headMu.Lock()
	defer g.headMu.Unlock()
	maxAge := g.HeadMaxAge
	if maxAge <= 0 {
		maxAge = 30 * time.Second
	}
	if !g.headReadAt.IsZero() && g.now().Sub(g.headReadAt) < maxAge {
		return g.head, nil
	}
	head, err := g.Revisions.Head(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the published head: %w", err)
	}
	g.head, g.headReadAt = head, g.now()
	return head, nil
}

// headHolds reports whether the revision published now holds the tenant's files of
// digest: false when another writer, a force-push or a shard move dropped or changed
// them since they were published.
func (g *GitOps) headHolds(ctx context.Context, code, digest string) (bool, string, error) {
	head, err := g.publishedHead(ctx)
	if err != nil {
		return false, "", err
	}
	held := publish.EmptyTenantDigest
	if head != "" {
		if held, err = g.Revisions.TenantDigest(ctx, head, render.DirName(code)); err != nil {
			return false, head, err
		}
	}
	return held == digest, head, nil
}

// publishTenant publishes the tenant's files (through the batcher, so tenants changing
// together share commits) unless what is published is already current. It does not wait
// for the batch: until the publish is done, no revision is observed.
func (r *EvaTenantReconciler) publishTenant(ctx context.Context, s *scope) error {
	t := s.tenant
	// The bundle renderPhase rendered: one render per reconcile.
	files, err := r.Renderer.FilesOf(s.rendered, s.bundle, render.TeardownNone)
	if err != nil {
		return err
	}
	digest := publish.TenantDigest(files)
	if t.Status.AppliedDigest == digest && t.Status.Revision != "" && r.GitOps.settled(t.UID, digest, t.Status.Revision) {
		held, err := r.stillPublished(ctx, s, digest)
		if err != nil || held {
			s.observed.Applied.Revision = t.Status.Revision
			return err
		}
		r.GitOps.resubmit(t.UID)
	}
	if wait := r.GitOps.holdBack(t.UID, digest); wait > 0 {
		// Coalesced: the reconcile after the wait publishes whatever the spec is then.
		s.publishWait = wait
		if r.Metrics != nil {
			r.Metrics.PublishThrottled.WithLabelValues(t.Spec.CapsuleCode).Inc()
		}
		return nil
	}
	done, rev, err := r.GitOps.publish(t, digest, files)
	if !done {
		if t.Status.AppliedDigest == digest {
			// The same files again (they went missing): what was applied still holds them.
			s.observed.Applied.Revision = t.Status.Revision
		}
		return nil // not published yet: Provisioned waits for the revision
	}
	if err != nil {
		s.log.Error(err, "publishing tenant")
		s.observed.Applied.Error = "publishing the tenant failed: see operator logs"
		if errors.Is(err, publish.ErrOtherOwner) {
			// The refusal names this tenant's code only, and what it can do.
			s.observed.Applied.Error = err.Error()
		}
		return err
	}
	if s.tenant.Status.AppliedDigest != digest {
		s.event(corev1.EventTypeNormal, status.EventModuleDeployStarted, "Published revision %s", rev)
	}
	s.tenant.Status.Revision, s.tenant.Status.AppliedDigest, s.tenant.Status.DecommissionStep = rev, digest, ""
	s.observed.Applied.Revision = rev
	return nil
}

// stillPublished reports whether the branch or tag still holds the tenant's files as
// last published (from its content: a restarted operator answers as the one that
// published). When it does not, the tenant is published again, with an event saying why.
// A head that cannot be read is an error, and the tenant is taken as still published.
func (r *EvaTenantReconciler) stillPublished(ctx context.Context, s *scope, digest string) (bool, error) {
	held, head, err := r.GitOps.headHolds(ctx, s.tenant.Spec.CapsuleCode, digest)
	if err != nil {
		return true, fmt.Errorf("checking the tenant's files are still published: %w", err)
	}
	if !held {
		s.event(corev1.EventTypeWarning, status.EventRepublished,
			"Published files missing or changed in revision %s (another writer or a force-push); publishing them again", head)
	}
	return held, nil
}

// observeDelivery reads what the GitOps tool applied of the tenant: its two Flux
// Kustomizations, or its foundation and workloads Argo CD Applications.
func (r *EvaTenantReconciler) observeDelivery(ctx context.Context, s *scope) error {
	return r.applier().observeDelivery(ctx, s)
}

// observeKustomizations reads the tenant's two Flux Kustomizations and whether each
// applied the published revision (or a later one).
func (r *EvaTenantReconciler) observeKustomizations(ctx context.Context, s *scope) error {
	g, err := observe.Kustomizations(ctx, r, r.Renderer.Env.Settings.FluxNamespace, s.tenant.Spec.CapsuleCode,
		func(ctx context.Context, revision string) (bool, string) { return r.applied(ctx, s, revision) })
	if err != nil {
		return err
	}
	s.observed.GitOps = g
	return nil
}

// applied reports whether the revision the GitOps tool applied ("main@sha1:<commit>",
// "<tag>@sha256:<digest>", a commit) holds the tenant's files as last published
// (status.appliedDigest), read from the branch or tag itself. When that cannot be told
// (an expired token, an unreachable remote), it says why, and logs it: the tenant's
// condition names it rather than waiting for the Kustomization forever.
func (r *EvaTenantReconciler) applied(ctx context.Context, s *scope, revision string) (bool, string) {
	published := s.tenant.Status.AppliedDigest
	if revision == "" || published == "" {
		return false, ""
	}
	held, err := r.GitOps.Revisions.TenantDigest(ctx, revision, render.DirName(s.tenant.Spec.CapsuleCode))
	if err != nil {
		s.log.Error(err, "reading what the applied revision holds of the tenant", "revision", revision)
		return false, err.Error()
	}
	return held == published, ""
}
