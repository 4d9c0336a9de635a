package status

import (
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func cond(t string, s metav1.ConditionStatus, reason string) *metav1.Condition {
	return &metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " message"}
}

func readyRelease(module, version string) ReleaseState {
	return ReleaseState{Module: module, Name: "eva-tenant-devusr/" + module, Version: version, Found: true,
		Generation: 2, ObservedGeneration: 2, Ready: cond("Ready", metav1.ConditionTrue, "InstallSucceeded"),
		LastAttemptedRevision: version}
}

// healthy is a tenant whose every dependency is ready.
func healthy() Observed {
	return Observed{
		Generation: 3,
		Namespace:  &NamespaceState{Name: "eva-tenant-devusr", Phase: "Active"},
		Applied:    AppliedState{Revision: "sha256:abc"},
		Streams: []StreamState{
			{Name: "eva-tenant-devusr/eva-devusr-events", Found: true, Ready: cond("Ready", metav1.ConditionTrue, "Created")},
			{Name: "eva-tenant-devusr/eva-devusr-commands", Found: true, Ready: cond("Ready", metav1.ConditionTrue, "Created")},
		},
		Releases:     []ReleaseState{readyRelease("crm", "1.4.0"), readyRelease("itsm", "1.2.0")},
		SeedsVersion: "seeds-1",
		SeedJob:      &JobState{Name: "eva-seed-seeds-1", Complete: true},
		Ingress:      &IngressState{Name: "eva-devusr", Addresses: 1},
	}
}

func TestCompute(t *testing.T) {
	type want struct {
		phase     evav1.Phase
		condition string
		status    metav1.ConditionStatus
		reason    string
		message   string // substring
	}
	cases := map[string]struct {
		mutate func(*Observed)
		want   want
	}{
		"all ready": {func(*Observed) {}, want{evav1.PhaseActive, evav1.ConditionReady, metav1.ConditionTrue, ReasonReady, ""}},
		"nothing yet": {func(o *Observed) {
			*o = Observed{Applied: AppliedState{Missing: []string{"Namespace/eva-tenant-devusr"}}, SeedsVersion: "s"}
		},
			want{evav1.PhaseRequested, evav1.ConditionNamespaceReady, metav1.ConditionFalse, ReasonNotFound, ""}},
		"namespace terminating": {func(o *Observed) { o.Namespace.Phase = "Terminating" },
			want{evav1.PhaseProvisioning, evav1.ConditionNamespaceReady, metav1.ConditionFalse, ReasonTerminating, "Namespace eva-tenant-devusr: Terminating"}},
		"object missing": {func(o *Observed) { o.Applied.Missing = []string{"Ingress/eva-devusr"} },
			want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonProgressing, "Ingress/eva-devusr"}},
		"apply failed": {func(o *Observed) { o.Applied.Error = "applying HelmRelease crm: see operator logs" },
			want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonApplyFailed, "see operator logs"}},
		"stream missing": {func(o *Observed) { o.Streams[1].Found = false },
			want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonStreamsNotReady, "Stream eva-tenant-devusr/eva-devusr-commands: not found"}},
		"messaging unavailable": {func(o *Observed) { o.MessagingError = "NATS unreachable: see operator logs" },
			want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonMessagingDown, "NATS unreachable"}},
		"gitops not applied yet": {func(o *Observed) {
			o.GitOps = gitOps(DeliveryState{Name: "flux-system/eva-tenant-devusr", Found: true, Ready: cond("Ready", metav1.ConditionTrue, "ReconciliationSucceeded"), LastAppliedRevision: "main@sha1:old"})
		}, want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonProgressing, "applied main@sha1:old, waiting for sha256:abc"}},
		"gitops applied": {func(o *Observed) { o.GitOps = gitOps(applied("eva-tenant-devusr")) },
			want{evav1.PhaseActive, evav1.ConditionProvisioned, metav1.ConditionTrue, ReasonReady, ""}},
		"gitops kustomization failing": {func(o *Observed) {
			o.GitOps = gitOps(DeliveryState{Name: "flux-system/eva-tenant-devusr", Found: true, Ready: cond("Ready", metav1.ConditionFalse, "BuildFailed")})
		}, want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonProgressing, "Kustomization flux-system/eva-tenant-devusr: BuildFailed"}},
		// The foundation applied, the workloads not yet: Provisioned is True on its own,
		// the releases are not read (they may still carry an older spec).
		"gitops workloads not applied yet": {func(o *Observed) {
			o.GitOps = gitOps(applied("eva-tenant-devusr"))
			o.GitOps.Workloads.Applied, o.GitOps.Workloads.LastAppliedRevision = false, "main@sha1:old"
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing,
			"Kustomization flux-system/eva-tenant-devusr-workloads: applied main@sha1:old, waiting for sha256:abc"}},
		// Whether the applied revision includes the published one could not be read (an
		// expired token): said, not waited on in silence.
		"gitops history unreadable": {func(o *Observed) {
			o.GitOps = gitOps(applied("eva-tenant-devusr"))
			o.GitOps.Workloads.Applied, o.GitOps.Workloads.LastAppliedRevision = false, "main@sha1:new"
			o.GitOps.Workloads.RevisionError = "fetching: authentication required"
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing,
			"applied main@sha1:new; cannot tell whether it includes sha256:abc: fetching: authentication required"}},
		// Flux works on a later commit (anyone's): the applied revision still includes
		// the tenant's, so nothing flaps.
		"gitops reconciling a later commit": {func(o *Observed) {
			o.GitOps = gitOps(applied("eva-tenant-devusr"))
			o.GitOps.Foundation.Ready = cond("Ready", metav1.ConditionUnknown, "Progressing")
			o.GitOps.Workloads.Ready = cond("Ready", metav1.ConditionFalse, "DependencyNotReady")
		}, want{evav1.PhaseActive, evav1.ConditionReady, metav1.ConditionTrue, ReasonReady, ""}},
		"gitops workloads failing": {func(o *Observed) {
			o.GitOps = gitOps(applied("eva-tenant-devusr"))
			o.GitOps.Workloads.Applied = false
			o.GitOps.Workloads.Ready = cond("Ready", metav1.ConditionFalse, "ReconciliationFailed")
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing,
			"Kustomization flux-system/eva-tenant-devusr-workloads: ReconciliationFailed"}},
		"stream not ready": {func(o *Observed) { o.Streams[0].Ready = cond("Ready", metav1.ConditionFalse, "Errored") },
			want{evav1.PhaseProvisioning, evav1.ConditionProvisioned, metav1.ConditionFalse, ReasonStreamsNotReady, "Errored"}},
		"seed job running": {func(o *Observed) { o.SeedJob.Complete = false },
			want{evav1.PhaseProvisioning, evav1.ConditionSeedLoaded, metav1.ConditionFalse, ReasonProgressing, "running"}},
		"seed job missing but annotated": {func(o *Observed) { o.SeedJob = nil; o.SeedAnnotation = "seeds-1" },
			want{evav1.PhaseActive, evav1.ConditionSeedLoaded, metav1.ConditionTrue, ReasonSeedAnnotated, ""}},
		"annotation for another version": {func(o *Observed) { o.SeedJob = nil; o.SeedAnnotation = "seeds-0" },
			want{evav1.PhaseProvisioning, evav1.ConditionSeedLoaded, metav1.ConditionFalse, ReasonNotFound, ""}},
		"seed job failed": {func(o *Observed) {
			o.SeedJob = &JobState{Name: "eva-seed-seeds-1", Failed: true, Message: "BackoffLimitExceeded"}
		},
			want{evav1.PhaseFailed, evav1.ConditionReady, metav1.ConditionFalse, ReasonDependencyFailed, "Job eva-seed-seeds-1: Failed"}},
		"no seeds": {func(o *Observed) { o.SeedsVersion = ""; o.SeedJob = nil },
			want{evav1.PhaseActive, evav1.ConditionSeedLoaded, metav1.ConditionTrue, ReasonNoSeedData, ""}},
		"release missing": {func(o *Observed) { o.Releases[1].Found = false },
			want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "HelmRelease eva-tenant-devusr/itsm: not found"}},
		"release old generation": {func(o *Observed) { o.Releases[0].ObservedGeneration = 1 },
			want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "generation not yet reconciled"}},
		"helm-controller's message while observedGeneration is -1": {func(o *Observed) {
			o.Releases[0].ObservedGeneration = -1
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "ValuesError")
			o.Releases[0].Ready.ObservedGeneration = 2
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "HelmRelease eva-tenant-devusr/crm: ValuesError"}},
		"chart version missing from the source for longer than the grace": {func(o *Observed) {
			o.Now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "SourceNotReady")
			o.Releases[0].Ready.LastTransitionTime = metav1.NewTime(o.Now.Add(-DefaultBlockedGrace))
		}, want{evav1.PhaseFailed, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonReleaseBlocked,
			"HelmRelease eva-tenant-devusr/crm: SourceNotReady since 2026-11-23T09:58:00Z: SourceNotReady message"}},
		// helm-controller says SourceNotReady while source-controller has not reconciled the
		// chart's latest generation: a queue (a fleet created at once), not a source that
		// lacks something. The make throughput run saw 50 of 100 tenants Failed for it.
		"a chart source-controller has not got to yet, however long": {func(o *Observed) {
			o.Now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "SourceNotReady")
			o.Releases[0].Ready.Message = "HelmChart 'eva-tenant-devusr/eva-tenant-devusr-crm' is not ready: latest generation of object has not been reconciled"
			o.Releases[0].Ready.LastTransitionTime = metav1.NewTime(o.Now.Add(-10 * DefaultBlockedGrace))
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing,
			"SourceNotReady: HelmChart 'eva-tenant-devusr/eva-tenant-devusr-crm' is not ready: latest generation"}},
		"an environment patch's valuesFrom missing for less than the grace": {func(o *Observed) {
			o.Now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "ValuesError")
			o.Releases[0].Ready.LastTransitionTime = metav1.NewTime(o.Now.Add(-DefaultBlockedGrace + time.Second))
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "ValuesError"}},
		"a shorter grace the operator was given, passed": {func(o *Observed) {
			o.Now, o.BlockedGrace = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), 20*time.Second
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "SourceNotReady")
			o.Releases[0].Ready.LastTransitionTime = metav1.NewTime(o.Now.Add(-20 * time.Second))
		}, want{evav1.PhaseFailed, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonReleaseBlocked, "since 2026-11-23T09:59:40Z"}},
		"a longer grace the operator was given, not yet passed": {func(o *Observed) {
			o.Now, o.BlockedGrace = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), time.Hour
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "SourceNotReady")
			o.Releases[0].Ready.LastTransitionTime = metav1.NewTime(o.Now.Add(-DefaultBlockedGrace))
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "SourceNotReady"}},
		// Right after a fix, the release in the cluster (or the cache) still has the old
		// spec and its exhausted retries: not a verdict on the new spec.
		"outdated release keeps its old failure to itself": {func(o *Observed) {
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "InstallFailed")
			o.Releases[0].RetriesExhausted, o.Releases[0].LastAction, o.Releases[0].Failures = true, "install", 4
			o.Releases[0].Outdated = true
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "not yet updated to the tenant's current spec"}},
		"stalled for an older generation": {func(o *Observed) {
			o.Releases[0].Ready = cond("Ready", metav1.ConditionUnknown, "Progressing")
			o.Releases[0].Stalled = cond("Stalled", metav1.ConditionTrue, "RetriesExceeded")
			o.Releases[0].Stalled.ObservedGeneration = 1
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "Progressing"}},
		// helm-controller looking again at the stalled generation 2 while the fix (generation
		// 3) is applied: its condition patch lands on the newer object and stamps Stalled
		// with generation 3, while its counters and observedGeneration stay those of 2.
		"stalled by a reconcile of the previous generation, stamped with this one": {func(o *Observed) {
			o.Releases[0].Generation, o.Releases[0].ObservedGeneration = 3, 2
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "InstallFailed")
			o.Releases[0].Ready.ObservedGeneration = 2
			o.Releases[0].Stalled = cond("Stalled", metav1.ConditionTrue, "RetriesExceeded")
			o.Releases[0].Stalled.ObservedGeneration = 3
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "Ready is for an older generation"}},
		"a stamped Stalled beside Ready at this generation": {func(o *Observed) {
			o.Releases[0].Generation, o.Releases[0].ObservedGeneration = 3, 3
			o.Releases[0].Ready.ObservedGeneration = 3
			o.Releases[0].Stalled = cond("Stalled", metav1.ConditionTrue, "RetriesExceeded")
			o.Releases[0].Stalled.ObservedGeneration = 3
		}, want{evav1.PhaseActive, evav1.ConditionModulesDeployed, metav1.ConditionTrue, ReasonReady, "deployed"}},
		"stalled once helm-controller concluded this generation": {func(o *Observed) {
			o.Releases[0].Generation, o.Releases[0].ObservedGeneration = 3, 3
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "AccessDenied")
			o.Releases[0].Stalled = cond("Stalled", metav1.ConditionTrue, "AccessDenied")
			o.Releases[0].Stalled.ObservedGeneration = 3
		}, want{evav1.PhaseFailed, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonReleaseStalled, "HelmRelease eva-tenant-devusr/crm: AccessDenied"}},
		"release ready condition stale": {func(o *Observed) { o.Releases[0].Ready.ObservedGeneration = 1 },
			want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "older generation"}},
		"release upgrading": {func(o *Observed) { o.Releases[0].Ready = cond("Ready", metav1.ConditionUnknown, "Progressing") },
			want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "HelmRelease eva-tenant-devusr/crm: Progressing"}},
		"release on another chart version": {func(o *Observed) { o.Releases[0].LastAttemptedRevision = "1.3.0" },
			want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "runs chart 1.3.0, want 1.4.0"}},
		// helm-controller installs a chart from an OCIRepository at its version with the
		// artifact's digest appended.
		"chart pinned by digest": {func(o *Observed) {
			o.Releases[0].ChartDigest = "sha256:8bdea696daa9a47e9b4803a95a541afa78fae2781649c64d7eadcf3d98c12f14"
			o.Releases[0].LastAttemptedRevision = "1.4.0+8bdea696daa9"
		}, want{evav1.PhaseActive, evav1.ConditionModulesDeployed, metav1.ConditionTrue, ReasonReady, ""}},
		"chart of another digest": {func(o *Observed) {
			o.Releases[0].ChartDigest = "sha256:8bdea696daa9a47e9b4803a95a541afa78fae2781649c64d7eadcf3d98c12f14"
			o.Releases[0].LastAttemptedRevision = "1.4.0+31e3b4e51399"
		}, want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "runs chart 1.4.0+31e3b4e51399, want 1.4.0"}},
		"chart by tag from an OCIRepository": {func(o *Observed) { o.Releases[0].LastAttemptedRevision = "1.4.0+31e3b4e51399" },
			want{evav1.PhaseActive, evav1.ConditionModulesDeployed, metav1.ConditionTrue, ReasonReady, ""}},
		"pin with a v prefix": {func(o *Observed) { o.Releases[0].Version = "v1.4.0" },
			want{evav1.PhaseActive, evav1.ConditionModulesDeployed, metav1.ConditionTrue, ReasonReady, ""}},
		"version from history": {func(o *Observed) { o.Releases[0].LastAttemptedRevision = ""; o.Releases[0].HistoryVersion = "1.4.0" },
			want{evav1.PhaseActive, evav1.ConditionModulesDeployed, metav1.ConditionTrue, ReasonReady, ""}},
		"release stalled": {func(o *Observed) {
			o.Releases[1].Ready = cond("Ready", metav1.ConditionFalse, "UpgradeFailed")
			o.Releases[1].Stalled = cond("Stalled", metav1.ConditionTrue, "RetriesExceeded")
		}, want{evav1.PhaseFailed, evav1.ConditionReady, metav1.ConditionFalse, ReasonDependencyFailed, "HelmRelease eva-tenant-devusr/itsm: RetriesExceeded"}},
		// helm-controller clears Stalled for a moment each time it looks at a stalled
		// release again (seen in internal/e2e); the failure counters stay.
		"retries exhausted while stalled is cleared": {func(o *Observed) {
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "InstallFailed")
			o.Releases[0].RetriesExhausted, o.Releases[0].LastAction, o.Releases[0].Failures = true, "install", 4
		}, want{evav1.PhaseFailed, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonReleaseFailed,
			"HelmRelease eva-tenant-devusr/crm: install failed 4 time(s), no retries left: InstallFailed"}},
		"retries exhausted and stalled say the same": {func(o *Observed) {
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "InstallFailed")
			o.Releases[0].Stalled = cond("Stalled", metav1.ConditionTrue, "RetriesExceeded")
			o.Releases[0].RetriesExhausted, o.Releases[0].LastAction, o.Releases[0].Failures = true, "install", 4
		}, want{evav1.PhaseFailed, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonReleaseFailed,
			"HelmRelease eva-tenant-devusr/crm: install failed 4 time(s), no retries left: InstallFailed"}},
		"ingress without address": {func(o *Observed) { o.Ingress.Addresses = 0 },
			want{evav1.PhaseProvisioning, evav1.ConditionIngressReady, metav1.ConditionFalse, ReasonNoAddress, "Ingress eva-devusr"}},
		"ingress missing": {func(o *Observed) { o.Ingress = nil },
			want{evav1.PhaseProvisioning, evav1.ConditionIngressReady, metav1.ConditionFalse, ReasonNotFound, ""}},
		"long message truncated": {func(o *Observed) {
			o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, strings.Repeat("x", 2000))
		},
			want{evav1.PhaseProvisioning, evav1.ConditionModulesDeployed, metav1.ConditionFalse, ReasonProgressing, "..."}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := healthy()
			tc.mutate(&o)
			res := Compute(o)
			if res.Phase != tc.want.phase {
				t.Errorf("phase %s, want %s", res.Phase, tc.want.phase)
			}
			v := res.Verdicts[tc.want.condition]
			if v.Status != tc.want.status || v.Reason != tc.want.reason || !strings.Contains(v.Message, tc.want.message) {
				t.Errorf("%s = %s/%s %q, want %s/%s containing %q", tc.want.condition, v.Status, v.Reason, v.Message,
					tc.want.status, tc.want.reason, tc.want.message)
			}
			if len(v.Message) > maxMessage {
				t.Errorf("message of %d bytes", len(v.Message))
			}
			if len(res.Verdicts) != 6 {
				t.Errorf("%d conditions, want 6", len(res.Verdicts))
			}
		})
	}
}

func TestRecordKeepsTransitionTimesAndFirstTrue(t *testing.T) {
	var st evav1.EvaTenantStatus
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st.ProvisioningStartedAt = &t0
	o := healthy()
	o.Ingress.Addresses = 0
	ts := Record(&st, observed(Compute(o)), 3, t0)
	if len(ts) != 6 || st.Phase != evav1.PhaseProvisioning {
		t.Fatalf("first apply: %d transitions, phase %s", len(ts), st.Phase)
	}
	t1 := metav1.NewTime(t0.Add(time.Minute))
	ts = Record(&st, observed(Compute(o)), 3, t1)
	if len(ts) != 0 {
		t.Fatalf("an unchanged result made transitions: %v", ts)
	}
	for _, c := range st.Conditions {
		if !c.LastTransitionTime.Equal(&t0) || c.ObservedGeneration != 3 {
			t.Errorf("%s: transition time %v, generation %d", c.Type, c.LastTransitionTime, c.ObservedGeneration)
		}
	}
	t2 := metav1.NewTime(t0.Add(2 * time.Minute))
	ts = Record(&st, observed(Compute(healthy())), 4, t2)
	if !BecameTrue(ts, evav1.ConditionIngressReady) || !BecameTrue(ts, evav1.ConditionReady) || st.Phase != evav1.PhaseActive {
		t.Fatalf("ingress ready: transitions %v, phase %s", ts, st.Phase)
	}
	if got := st.FirstTrue[evav1.ConditionIngressReady]; !got.Equal(&t2) {
		t.Errorf("IngressReady first true at %v, want %v", got, t2)
	}
	if got := st.FirstTrue[evav1.ConditionNamespaceReady]; !got.Equal(&t0) {
		t.Errorf("NamespaceReady first true at %v, want %v", got, t0)
	}
	if len(st.Modules) != 2 || !st.Modules[0].Ready {
		t.Errorf("modules: %+v", st.Modules)
	}
}

// TestProgressConditionsForKstatus: what kstatus reads besides Ready. Provisioning says
// Reconciling, Failed says Stalled with the failing verdict's reason, Active says
// neither; each replaces the other.
func TestProgressConditionsForKstatus(t *testing.T) {
	now := metav1.Now()
	var st evav1.EvaTenantStatus
	check := func(want map[string]string) {
		t.Helper()
		for _, ct := range []string{evav1.ConditionReconciling, evav1.ConditionStalled} {
			c := apimeta.FindStatusCondition(st.Conditions, ct)
			switch reason, wanted := want[ct]; {
			case wanted && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason):
				t.Errorf("%s = %+v, want True %s", ct, c, reason)
			case !wanted && c != nil:
				t.Errorf("%s = %+v, want absent", ct, c)
			}
		}
	}
	o := healthy()
	o.Releases[0].Ready = cond("Ready", metav1.ConditionUnknown, "Progressing")
	Record(&st, observed(Compute(o)), 1, now)
	check(map[string]string{evav1.ConditionReconciling: ReasonProgressing})

	o.Releases[0].Ready = cond("Ready", metav1.ConditionFalse, "InstallFailed")
	o.Releases[0].RetriesExhausted, o.Releases[0].LastAction, o.Releases[0].Failures = true, "install", 4
	Record(&st, observed(Compute(o)), 1, now)
	check(map[string]string{evav1.ConditionStalled: ReasonReleaseFailed})

	Record(&st, observed(Compute(healthy())), 2, now)
	check(map[string]string{})
}

// applied is a Kustomization that applied the published revision.
func applied(name string) DeliveryState {
	return DeliveryState{Name: "flux-system/" + name, Found: true, Ready: cond("Ready", metav1.ConditionTrue, "ReconciliationSucceeded"), Applied: true}
}

// gitOps is a tenant whose foundation is in the state given and whose workloads applied.
func gitOps(foundation DeliveryState) *GitOpsState {
	return &GitOpsState{Foundation: foundation, Workloads: applied("eva-tenant-devusr-workloads")}
}
