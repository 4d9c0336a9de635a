package status

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// maxMessage bounds condition messages: they carry a dependency's message up, and that
// is for humans, not for storing logs.
const maxMessage = 512

// Verdict is one condition's outcome.
type Verdict struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
	// Terminal marks a dependency that will not recover by itself (Stalled, retries
	// exhausted): the tenant is Failed.
	Terminal bool
}

func ok(reason, msg string) Verdict {
	return Verdict{Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}
func wait(reason, msg string) Verdict {
	return Verdict{Status: metav1.ConditionFalse, Reason: reason, Message: truncate(msg)}
}
func fail(reason, msg string) Verdict {
	return Verdict{Status: metav1.ConditionFalse, Reason: reason, Message: truncate(msg), Terminal: true}
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage-3] + "..."
	}
	return s
}

// NamespaceReady: the namespace exists and is Active.
func NamespaceReady(o Observed) Verdict {
	switch {
	case o.Namespace == nil:
		return wait(ReasonNotFound, "namespace not found")
	case o.Namespace.Phase == "Terminating":
		return wait(ReasonTerminating, fmt.Sprintf("Namespace %s: Terminating", o.Namespace.Name))
	}
	return ok(ReasonReady, fmt.Sprintf("Namespace %s is Active", o.Namespace.Name))
}

// Provisioned: the bundle is applied (every object exists) and both streams exist and
// are Ready.
func Provisioned(o Observed) Verdict {
	if o.FenceMismatch != "" {
		return wait(ReasonFenceMismatch, o.FenceMismatch)
	}
	if o.Applied.Error != "" {
		return wait(ReasonApplyFailed, o.Applied.Error)
	}
	if o.Applied.Waiting != "" {
		return wait(ReasonProgressing, "modules wait for the quota: "+o.Applied.Waiting)
	}
	if len(o.Applied.Missing) > 0 {
		return wait(ReasonProgressing, "not yet applied: "+strings.Join(o.Applied.Missing, ", "))
	}
	if o.MessagingError != "" {
		return wait(ReasonMessagingDown, o.MessagingError)
	}
	if g := o.GitOps; g != nil {
		if v := deliveryVerdict(g.Foundation, o.Applied.Revision); v != nil {
			return *v
		}
	}
	for _, s := range o.Streams {
		switch {
		case !s.Found:
			return wait(ReasonStreamsNotReady, fmt.Sprintf("Stream %s: not found", s.Name))
		case s.Ready == nil:
			return wait(ReasonStreamsNotReady, fmt.Sprintf("Stream %s: not reconciled yet", s.Name))
		case s.Ready.Status != metav1.ConditionTrue:
			return wait(ReasonStreamsNotReady, fmt.Sprintf("Stream %s: %s: %s", s.Name, s.Ready.Reason, s.Ready.Message))
		}
	}
	return ok(ReasonReady, "bundle applied at "+o.Applied.Revision+" and streams ready")
}

// deliveryVerdict says why the GitOps tool has not yet applied the published revision
// through one delivery object (a Flux Kustomization, an Argo CD Application), or nil
// once it has. kustomize-controller records
// lastAppliedRevision only after a successful apply (and, when it waits, health check),
// so an applied revision that includes the published one settles it: Ready is not read
// then, because Flux sets it Unknown (and the workloads DependencyNotReady) while it
// works on any later commit to the branch, someone else's included.
func deliveryVerdict(k DeliveryState, published string) *Verdict {
	name := kindOr(k.Kind, "Kustomization") + " " + k.Name
	var v Verdict
	switch {
	case published == "":
		v = wait(ReasonProgressing, "bundle not yet published")
	case !k.Found:
		v = wait(ReasonNotFound, name+": not found")
	case k.Applied:
		return nil
	case k.Ready == nil:
		v = wait(ReasonProgressing, name+": not reconciled yet")
	case k.Ready.Status != metav1.ConditionTrue:
		v = wait(ReasonProgressing, fmt.Sprintf("%s: %s: %s", name, k.Ready.Reason, k.Ready.Message))
	case k.RevisionError != "":
		v = wait(ReasonProgressing, fmt.Sprintf("%s: applied %s; cannot tell whether it includes %s: %s",
			name, firstNonEmpty(k.LastAppliedRevision), published, k.RevisionError))
	default:
		v = wait(ReasonProgressing, fmt.Sprintf("%s: applied %s, waiting for %s", name, firstNonEmpty(k.LastAppliedRevision), published))
	}
	return &v
}

// SeedLoaded: the seed Job for SeedsVersion completed, or the provisioner annotated
// the tenant with that version.
func SeedLoaded(o Observed) Verdict {
	switch {
	case o.SeedsVersion == "":
		return ok(ReasonNoSeedData, "no seedsVersion: nothing to load")
	case o.SeedAnnotation == o.SeedsVersion:
		return ok(ReasonSeedAnnotated, "seed data "+o.SeedsVersion+" loaded (annotation)")
	case o.SeedJob == nil:
		return wait(ReasonNotFound, "seed Job for "+o.SeedsVersion+" not found")
	case o.SeedJob.Complete:
		return ok(ReasonSeedJobComplete, fmt.Sprintf("Job %s: Complete", o.SeedJob.Name))
	case o.SeedJob.Failed:
		return fail(ReasonSeedJobFailed, fmt.Sprintf("Job %s: Failed: %s", o.SeedJob.Name, o.SeedJob.Message))
	}
	return wait(ReasonProgressing, fmt.Sprintf("Job %s: running", o.SeedJob.Name))
}

// ModulesDeployed: every HelmRelease is Ready for its current generation and the
// pinned chart version. A Stalled release fails the tenant.
func ModulesDeployed(o Observed) Verdict {
	// In GitOps mode, releases are read once Flux applied the published workloads: until
	// then, what the cluster holds may be an older spec (or nothing yet).
	if g := o.GitOps; g != nil {
		if v := deliveryVerdict(g.Workloads, o.Applied.Revision); v != nil {
			return *v
		}
	}
	var waiting []string
	for _, r := range o.Releases {
		v := releaseVerdict(r, o.Now, o.blockedGrace())
		if v.Terminal {
			return v
		}
		if v.Status != metav1.ConditionTrue {
			waiting = append(waiting, v.Message)
		}
	}
	if len(waiting) > 0 {
		return wait(ReasonProgressing, strings.Join(waiting, "; "))
	}
	return ok(ReasonReady, fmt.Sprintf("%d module(s) deployed", len(o.Releases)))
}

// DefaultBlockedGrace is how long a release may wait on something only a person can fix
// (a chart version its source does not have, a valuesFrom object an environment patch
// names that does not exist) before the tenant is Failed, unless the operator is told
// otherwise (Observed.BlockedGrace, --blocked-grace). Shorter waits are normal: a new
// release waits seconds for its chart to be fetched.
const DefaultBlockedGrace = 2 * time.Minute

// blockedGrace is o's grace, or the default.
func (o *Observed) blockedGrace() time.Duration {
	if o.BlockedGrace > 0 {
		return o.BlockedGrace
	}
	return DefaultBlockedGrace
}

// blockedReasons are helm-controller's Ready reasons for a release that cannot start
// and is only retried, never given up on (helm-controller v1.4,
// internal/controller/helmrelease_controller.go).
var blockedReasons = map[string]bool{"SourceNotReady": true, "ValuesError": true, "ArtifactFailed": true, "AccessDenied": true}

// sourceQueued says helm-controller's SourceNotReady only means source-controller has not
// yet reconciled the chart's latest generation (helm-controller's source readiness check
// writes this message while the chart's Ready is not False; a chart that failed carries
// its own message instead): a source-controller with a queue, as when a fleet is created
// at once, which time alone resolves. It never counts as blocked.
func sourceQueued(c *metav1.Condition) bool {
	return c.Reason == "SourceNotReady" && strings.HasSuffix(c.Message, "is not ready: latest generation of object has not been reconciled")
}

func releaseVerdict(r ReleaseState, now time.Time, grace time.Duration) Verdict {
	name := kindOr(r.Kind, "HelmRelease") + " " + r.Name
	switch {
	case !r.Found:
		return wait(ReasonNotFound, name+": not found")
	case r.Outdated:
		return wait(ReasonProgressing, name+": not yet updated to the tenant's current spec")
	case r.RetriesExhausted:
		// One message whether or not helm-controller shows Stalled at this instant, so
		// the tenant does not flap between two texts (or two phases).
		msg := fmt.Sprintf("%s: %s failed %d time(s), no retries left", name, r.LastAction, r.Failures)
		if r.Ready != nil && r.Ready.Status == metav1.ConditionFalse {
			msg += fmt.Sprintf(": %s: %s", r.Ready.Reason, r.Ready.Message)
		}
		return fail(ReasonReleaseFailed, msg)
	// Stalled counts only once helm-controller has concluded a reconcile of this
	// generation (status.observedGeneration). The condition's own observedGeneration does
	// not say that: helm-controller's patch helper applies condition changes to the object
	// as it is when the patch is sent and stamps them with that object's generation, while
	// the rest of the status comes from the object it reconciled. A reconcile of the old
	// spec that ends just after a fix is applied publishes Stalled RetriesExceeded with the
	// new generation, before any attempt at the new spec. Every path that sets Stalled
	// ends its reconcile by writing observedGeneration. Nor does Stalled count beside
	// Ready=True (a stale read of that same stamp): helm-controller never keeps both.
	case r.Stalled != nil && r.Stalled.Status == metav1.ConditionTrue && r.ObservedGeneration >= r.Generation &&
		(r.Ready == nil || r.Ready.Status != metav1.ConditionTrue) &&
		(r.Stalled.ObservedGeneration == 0 || r.Stalled.ObservedGeneration == r.Generation):
		return fail(ReasonReleaseStalled, fmt.Sprintf("%s: %s: %s", name, r.Stalled.Reason, r.Stalled.Message))
	case r.Ready == nil:
		return wait(ReasonProgressing, name+": not reconciled yet")
	// helm-controller keeps status.observedGeneration at -1 until a reconcile completes,
	// while its Ready condition carries the generation it is about: read that, so what
	// helm-controller says (ValuesError, a chart version it cannot find) reaches the
	// tenant instead of "not yet reconciled".
	case r.Ready.ObservedGeneration != 0 && r.Ready.ObservedGeneration < r.Generation:
		return wait(ReasonProgressing, name+": Ready is for an older generation")
	case r.Ready.Status == metav1.ConditionFalse && blockedReasons[r.Ready.Reason] && !sourceQueued(r.Ready) && !now.IsZero() &&
		(r.Ready.ObservedGeneration == 0 || r.Ready.ObservedGeneration == r.Generation) &&
		!r.Ready.LastTransitionTime.IsZero() && now.Sub(r.Ready.LastTransitionTime.Time) >= grace:
		// Stable text (the time it started, not how long): no status churn while it lasts.
		return fail(ReasonReleaseBlocked, fmt.Sprintf("%s: %s since %s: %s", name, r.Ready.Reason,
			r.Ready.LastTransitionTime.UTC().Format(time.RFC3339), r.Ready.Message))
	case r.Ready.Status != metav1.ConditionTrue:
		return wait(ReasonProgressing, fmt.Sprintf("%s: %s: %s", name, r.Ready.Reason, r.Ready.Message))
	case r.ObservedGeneration < r.Generation:
		return wait(ReasonProgressing, name+": generation not yet reconciled")
	case !SameChartVersion(r.LastAttemptedRevision, r.Version, r.ChartDigest) && !SameChartVersion(r.HistoryVersion, r.Version, r.ChartDigest):
		return wait(ReasonProgressing, fmt.Sprintf("%s: runs chart %s, want %s", name, firstNonEmpty(r.LastAttemptedRevision, r.HistoryVersion), r.Version))
	}
	return ok(ReasonReady, name+": Ready")
}

// kindOr is kind, or def when empty.
func kindOr(kind, def string) string {
	if kind == "" {
		return def
	}
	return kind
}

// sameVersion compares chart versions, ignoring a leading "v" (a pin may carry one,
// Helm reports without).
// SameChartVersion says whether helm-controller's version a is the chart version want. A
// chart from an OCIRepository runs at its version with the first twelve hex digits of
// the artifact's digest appended as build metadata (1.4.0+8bdea696daa9): those must be
// the pinned digest's when it is known (digest), and may be any otherwise.
func SameChartVersion(a, want, digest string) bool {
	a, want = strings.TrimPrefix(a, "v"), strings.TrimPrefix(want, "v")
	if a == "" || a == want {
		return a != ""
	}
	rest, ok := strings.CutPrefix(a, want)
	if !ok || len(rest) != 13 || (rest[0] != '+' && rest[0] != '.') {
		return false
	}
	if hex := strings.TrimPrefix(digest, "sha256:"); len(hex) >= 12 {
		return rest[1:] == hex[:12]
	}
	return strings.Trim(rest[1:], "0123456789abcdef") == ""
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return "none"
}

// IngressReady: the tenant Ingress exists and has a load-balancer address.
func IngressReady(o Observed) Verdict {
	switch {
	case o.Ingress == nil:
		return wait(ReasonNotFound, "Ingress not found")
	case o.Ingress.Addresses == 0:
		return wait(ReasonNoAddress, fmt.Sprintf("Ingress %s: no load-balancer address yet", o.Ingress.Name))
	}
	return ok(ReasonReady, fmt.Sprintf("Ingress %s has an address", o.Ingress.Name))
}

// ConditionTypes are the five conditions, in the order they are computed.
var ConditionTypes = []string{
	evav1.ConditionNamespaceReady, evav1.ConditionProvisioned, evav1.ConditionSeedLoaded,
	evav1.ConditionModulesDeployed, evav1.ConditionIngressReady,
}

var rules = map[string]func(Observed) Verdict{
	evav1.ConditionNamespaceReady:  NamespaceReady,
	evav1.ConditionProvisioned:     Provisioned,
	evav1.ConditionSeedLoaded:      SeedLoaded,
	evav1.ConditionModulesDeployed: ModulesDeployed,
	evav1.ConditionIngressReady:    IngressReady,
}

// Result is the tenant's computed status.
type Result struct {
	Verdicts map[string]Verdict // by condition type, the five and Ready
	// Terminal is the verdict that failed the tenant (nil unless Phase is Failed).
	Terminal *Verdict
	Phase    evav1.Phase
	Modules  []evav1.ModuleStatus
}

// Compute derives the conditions, phase and module status from what was observed.
func Compute(o Observed) Result {
	res := Result{Verdicts: map[string]Verdict{}}
	var notReady []string
	var terminal *Verdict
	for _, t := range ConditionTypes {
		v := rules[t](o)
		res.Verdicts[t] = v
		if v.Status != metav1.ConditionTrue {
			notReady = append(notReady, t)
			if v.Terminal && terminal == nil {
				terminal = &v
			}
		}
	}
	switch {
	case terminal != nil:
		res.Verdicts[evav1.ConditionReady] = Verdict{Status: metav1.ConditionFalse, Reason: ReasonDependencyFailed, Message: terminal.Message, Terminal: true}
		res.Phase = evav1.PhaseFailed
		res.Terminal = terminal
	case len(notReady) == 0:
		res.Verdicts[evav1.ConditionReady] = ok(ReasonReady, "tenant provisioned")
		res.Phase = evav1.PhaseActive
	default:
		res.Verdicts[evav1.ConditionReady] = wait(ReasonProgressing, "waiting for "+strings.Join(notReady, ", "))
		res.Phase = evav1.PhaseProvisioning
		if o.Namespace == nil && len(o.Applied.Missing) > 0 && o.Applied.Revision == "" {
			res.Phase = evav1.PhaseRequested
		}
	}
	for _, r := range o.Releases {
		v := releaseVerdict(r, o.Now, o.blockedGrace())
		res.Modules = append(res.Modules, evav1.ModuleStatus{
			Name: r.Module, Version: r.Version, Ready: v.Status == metav1.ConditionTrue,
			Reason: v.Reason, Message: v.Message,
		})
	}
	return res
}
