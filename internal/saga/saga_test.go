package saga

import (
	"testing"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// flux is a tenant's saga under Flux at a step: published at rev-1, the namespace still
// there, both Kustomizations found and applied, nothing left.
func flux(step evav1.DecommissionStep) Observed {
	return Observed{Step: step, Revision: "main@sha1:rev-1", EverPublished: true, Namespace: "eva-tenant-acmeco",
		Foundation: Delivery{Name: "Kustomization flux-system/eva-tenant-acmeco", Found: true, Applied: true},
		Workloads:  Delivery{Name: "Kustomization flux-system/eva-tenant-acmeco-workloads", Found: true, Applied: true}}
}

// argo is the same saga under Argo CD.
func argo(step evav1.DecommissionStep) Observed {
	o := flux(step)
	o.ArgoCD = true
	o.Foundation.Name, o.Workloads.Name = "Application argocd/eva-acmeco", "Application argocd/eva-acmeco-workloads"
	return o
}

// TestNextTakesEachStepInOrder walks the saga step by step, in both appliers, each
// step's waits first and then its way forward.
func TestNextTakesEachStepInOrder(t *testing.T) {
	for name, c := range map[string]struct {
		o    Observed
		edit func(*Observed)
		want Decision
	}{
		// Step 0: nothing published yet.
		"never published, nothing in the cluster: done": {flux(""), func(o *Observed) {
			o.EverPublished, o.NamespaceGone, o.Foundation.Found, o.Workloads.Found = false, true, false, false
		}, Decision{Action: Finish}},
		"never published, the namespace is there: take it apart": {flux(""), func(o *Observed) { o.EverPublished = false },
			Decision{Action: Publish, Step: evav1.StepStreamsRemoved}},
		"never published, a Kustomization is there: take it apart": {flux(""), func(o *Observed) {
			o.EverPublished, o.NamespaceGone, o.Workloads.Found = false, true, false
		}, Decision{Action: Publish, Step: evav1.StepStreamsRemoved}},
		"published: first step": {flux(""), nil, Decision{Action: Publish, Step: evav1.StepStreamsRemoved}},

		// Step 0: a move's source takes the traffic away first, and drains.
		"moving: traffic first": {flux(""), func(o *Observed) { o.Moving = true },
			Decision{Action: Publish, Step: evav1.StepTrafficRemoved}},
		"traffic: workloads not applied yet": {flux(evav1.StepTrafficRemoved), func(o *Observed) {
			o.Moving, o.Workloads.Applied = true, false
		}, wait("waiting for Kustomization flux-system/eva-tenant-acmeco-workloads to apply main@sha1:rev-1")},
		"traffic: applied, draining": {flux(evav1.StepTrafficRemoved), func(o *Observed) { o.Moving = true },
			Decision{Action: Drain, Message: "traffic taken off; draining"}},
		"traffic: drained": {flux(evav1.StepTrafficRemoved), func(o *Observed) { o.Moving, o.Drained = true, true },
			Decision{Action: Publish, Step: evav1.StepStreamsRemoved}},
		"traffic: decommissioned mid-move, no drain": {flux(evav1.StepTrafficRemoved), nil,
			Decision{Action: Publish, Step: evav1.StepStreamsRemoved}},

		// Step 1: streams out.
		"streams: foundation not applied yet": {flux(evav1.StepStreamsRemoved), func(o *Observed) { o.Foundation.Applied = false },
			wait("waiting for Kustomization flux-system/eva-tenant-acmeco to apply main@sha1:rev-1")},
		"streams: foundation missing, namespace there": {flux(evav1.StepStreamsRemoved), func(o *Observed) {
			o.Foundation.Found, o.Foundation.Applied = false, false
		}, wait("waiting for Kustomization flux-system/eva-tenant-acmeco to exist and apply main@sha1:rev-1")},
		"streams: foundation missing, namespace gone: nothing to order": {flux(evav1.StepStreamsRemoved), func(o *Observed) {
			o.Foundation.Found, o.Foundation.Applied, o.NamespaceGone = false, false, true
		}, Decision{Action: Publish, Step: evav1.StepReleasesRemoved}},
		"streams: a Stream left": {flux(evav1.StepStreamsRemoved), func(o *Observed) { o.StreamsLeft = []string{"eva-ACMECO-events"} },
			wait("waiting for Stream eva-ACMECO-events to be deleted")},
		"streams: gone": {flux(evav1.StepStreamsRemoved), nil, Decision{Action: Publish, Step: evav1.StepReleasesRemoved}},
		"streams: gone, direct messaging deletes them in JetStream first": {flux(evav1.StepStreamsRemoved),
			func(o *Observed) { o.DirectMessaging = true },
			Decision{Action: Publish, Step: evav1.StepReleasesRemoved, DeleteStreams: true}},

		// Step 2: releases out.
		"releases: workloads not applied yet": {flux(evav1.StepReleasesRemoved), func(o *Observed) { o.Workloads.Applied = false },
			wait("waiting for Kustomization flux-system/eva-tenant-acmeco-workloads to apply main@sha1:rev-1")},
		"releases: still installed": {flux(evav1.StepReleasesRemoved), func(o *Observed) { o.ReleasesLeft = []string{"crm", "itsm"} },
			wait("waiting for HelmReleases to be uninstalled: crm, itsm")},
		"releases: uninstalled": {flux(evav1.StepReleasesRemoved), nil, Decision{Action: Publish, Step: evav1.StepNamespaceOnly}},
		"releases, Argo CD: Applications left": {argo(evav1.StepReleasesRemoved), func(o *Observed) {
			o.WorkloadApplications = []string{"eva-acmeco-crm", "eva-acmeco-workloads"}
		}, wait("waiting for Argo CD to delete the Applications and their resources: eva-acmeco-crm, eva-acmeco-workloads")},
		"releases, Argo CD: gone, whatever the workloads Application said": {argo(evav1.StepReleasesRemoved),
			func(o *Observed) { o.Workloads.Found, o.Workloads.Applied = false, false },
			Decision{Action: Publish, Step: evav1.StepNamespaceOnly}},

		// Step 3: the namespace alone.
		"namespace only: not applied yet": {flux(evav1.StepNamespaceOnly), func(o *Observed) { o.Foundation.Applied = false },
			wait("waiting for Kustomization flux-system/eva-tenant-acmeco to apply main@sha1:rev-1")},
		"namespace only: applied": {flux(evav1.StepNamespaceOnly), nil, Decision{Action: Publish, Step: evav1.StepRemoved}},

		// Step 4: out of the tree.
		"removed: namespace not pruned yet": {flux(evav1.StepRemoved), nil,
			wait("waiting for Namespace eva-tenant-acmeco to be pruned")},
		"removed, Argo CD: the last Application kept": {argo(evav1.StepRemoved), func(o *Observed) {
			o.Applications = []string{"eva-acmeco"}
		}, wait("waiting for Argo CD to prune Applications eva-acmeco and Namespace eva-tenant-acmeco " +
			"(a root Application without allowEmpty keeps the last tenant of its tree)")},
		"removed: pruned":          {flux(evav1.StepRemoved), func(o *Observed) { o.NamespaceGone = true }, Decision{Action: Finish}},
		"removed, Argo CD: pruned": {argo(evav1.StepRemoved), func(o *Observed) { o.NamespaceGone = true }, Decision{Action: Finish}},
	} {
		t.Run(name, func(t *testing.T) {
			o := c.o
			if c.edit != nil {
				c.edit(&o)
			}
			if got := Next(o); got != c.want {
				t.Errorf("Next = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestNextNeverGoesBack: from each step, whatever is observed, the saga publishes only
// the next step, waits, or finishes once nothing is left; it never publishes a step it
// passed.
func TestNextNeverGoesBack(t *testing.T) {
	order := []evav1.DecommissionStep{"", evav1.StepTrafficRemoved, evav1.StepStreamsRemoved, evav1.StepReleasesRemoved,
		evav1.StepNamespaceOnly, evav1.StepRemoved}
	for i, step := range order {
		for _, base := range []Observed{flux(step), argo(step)} {
			for mask := range 1 << 8 {
				o := base
				o.NamespaceGone = mask&1 != 0
				o.Foundation.Found, o.Foundation.Applied = mask&2 != 0, mask&4 != 0
				o.Workloads.Found, o.Workloads.Applied = mask&8 != 0, mask&16 != 0
				o.EverPublished = mask&32 != 0
				o.Moving, o.Drained = mask&64 != 0, mask&128 != 0
				next := order[min(i+1, len(order)-1)]
				if step == "" && !o.Moving {
					next = evav1.StepStreamsRemoved // only a move's source takes its traffic first
				}
				d := Next(o)
				switch {
				case d.Action == Publish && (step == evav1.StepRemoved || d.Step != next):
					t.Errorf("at %q (%+v): publishes %q", step, o, d.Step)
				case d.Action == Drain && (step != evav1.StepTrafficRemoved || !o.Moving || o.Drained):
					t.Errorf("at %q (%+v): drains", step, o)
				case d.Action == Finish && step != evav1.StepRemoved && step != "":
					t.Errorf("at %q (%+v): finishes mid-saga", step, o)
				case d.Action == Finish && !o.NamespaceGone:
					t.Errorf("at %q (%+v): finishes with the namespace still there", step, o)
				case d.Action == Wait && d.Message == "":
					t.Errorf("at %q (%+v): waits without saying for what", step, o)
				}
			}
		}
	}
}
