// Package saga plans the GitOps decommission of a tenant: from what the operator
// observed, the one thing to do next. Each step is a publish the GitOps tool applies
// (and prunes) before the next is published, in pure-cluster mode's order:
//
//  0. TrafficRemoved (the source of a move between cells only): the tree without the
//     Ingress; wait until the workloads applied it, then wait out the drain;
//  1. StreamsRemoved: the tree without the Ingress, streams and alert rules; wait until the
//     foundation applied it and the Stream objects are gone (NACK deletes the streams;
//     with direct messaging the operator deletes them in JetStream);
//  2. ReleasesRemoved: the workloads out too; wait until they are uninstalled (Flux:
//     the workloads Kustomization applied it and helm-controller uninstalled every
//     release; Argo CD: the workloads and module Applications are gone, with their
//     resources);
//  3. NamespaceOnly: the Decommissioned bundle, the namespace alone (the publisher
//     refuses to remove a tenant whose published bundle is not that); wait until the
//     foundation applied it;
//  4. Removed: the tenant out of the tree; wait until the namespace is pruned.
//
// Next is a pure function, like status.Compute and rollout.Plan: the reconciler reads
// the cluster into Observed, asks Next, and does what the Decision says. The step
// published is recorded in status.decommissionStep, so a restarted operator resumes.
package saga

import (
	"strings"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// Delivery is what the GitOps tool applied through one delivery object (a Flux
// Kustomization, an Argo CD Application).
type Delivery struct {
	// Name says which, in messages ("Kustomization flux-system/eva-tenant-acmeco").
	Name string
	// Found: the object exists. Applied: it applied the last published step (or later).
	Found, Applied bool
}

// Observed is what the next step depends on.
type Observed struct {
	// Step is the step last published (status.decommissionStep); empty before the first.
	Step evav1.DecommissionStep
	// Revision is the revision last published (status.revision), for messages.
	Revision string
	// EverPublished: the tenant was published (a revision recorded, or a publish
	// submitted); a tenant never published and with nothing in the cluster has nothing
	// to take apart.
	EverPublished bool
	// Namespace is the tenant's namespace; NamespaceGone says it does not exist.
	Namespace     string
	NamespaceGone bool
	// Foundation and Workloads are the tenant's two delivery objects.
	Foundation, Workloads Delivery
	// ArgoCD: Argo CD applies the tree (else Flux).
	ArgoCD bool
	// DirectMessaging: the streams live in JetStream only (no Stream objects); the
	// operator deletes them itself.
	DirectMessaging bool
	// Moving: the tenant is taken off the source cell of a move: its traffic first,
	// then the drain (Drained says it is over), then the rest.
	Moving, Drained bool
	// StreamsLeft, ReleasesLeft and ApplicationsLeft name the tenant's Stream objects,
	// HelmReleases and Argo CD Applications still in the cluster (sorted); Applications
	// counts the foundation's too, WorkloadApplications does not.
	StreamsLeft, ReleasesLeft, Applications, WorkloadApplications []string
}

// Action is what the reconciler does.
type Action int

const (
	// Wait: nothing to do but look again later (Message says for what).
	Wait Action = iota
	// Publish the tenant's files of Step (a nil tree for StepRemoved).
	Publish
	// Finish: everything is gone; release the code and remove the finalizer.
	Finish
	// Drain: the traffic is off; record since when (once) and wait out the drain.
	Drain
)

// Decision is the next thing to do.
type Decision struct {
	Action Action
	// Step to publish (Publish).
	Step evav1.DecommissionStep
	// DeleteStreams: before publishing, delete the tenant's streams in JetStream (direct
	// messaging); a failure is waited on instead.
	DeleteStreams bool
	// Message is the Ready condition's message while waiting.
	Message string
}

func wait(msg string) Decision { return Decision{Action: Wait, Message: msg} }

func publish(step evav1.DecommissionStep) Decision { return Decision{Action: Publish, Step: step} }

// Next plans the next thing to do.
func Next(o Observed) Decision {
	switch o.Step {
	case "":
		if !o.EverPublished && o.NamespaceGone && !o.Foundation.Found && !o.Workloads.Found {
			return Decision{Action: Finish}
		}
		if o.Moving {
			return publish(evav1.StepTrafficRemoved)
		}
		return publish(evav1.StepStreamsRemoved)
	case evav1.StepTrafficRemoved:
		if ok, msg := applied(o, o.Workloads); !ok {
			return wait(msg)
		}
		if o.Moving && !o.Drained {
			return Decision{Action: Drain, Message: "traffic taken off; draining"}
		}
		return publish(evav1.StepStreamsRemoved)
	case evav1.StepStreamsRemoved:
		if ok, msg := applied(o, o.Foundation); !ok {
			return wait(msg)
		}
		if len(o.StreamsLeft) > 0 {
			return wait("waiting for Stream " + o.StreamsLeft[0] + " to be deleted")
		}
		d := publish(evav1.StepReleasesRemoved)
		d.DeleteStreams = o.DirectMessaging
		return d
	case evav1.StepReleasesRemoved:
		if o.ArgoCD {
			// The workloads and module Applications are out of the published tree: the
			// root Application prunes them, and each is gone once Argo CD deleted its
			// resources (the resources finalizer).
			if len(o.WorkloadApplications) > 0 {
				return wait("waiting for Argo CD to delete the Applications and their resources: " +
					strings.Join(o.WorkloadApplications, ", "))
			}
			return publish(evav1.StepNamespaceOnly)
		}
		if ok, msg := applied(o, o.Workloads); !ok {
			return wait(msg)
		}
		if len(o.ReleasesLeft) > 0 {
			return wait("waiting for HelmReleases to be uninstalled: " + strings.Join(o.ReleasesLeft, ", "))
		}
		return publish(evav1.StepNamespaceOnly)
	case evav1.StepNamespaceOnly:
		if ok, msg := applied(o, o.Foundation); !ok {
			return wait(msg)
		}
		return publish(evav1.StepRemoved)
	}
	// StepRemoved: out of the tree; the namespace goes when the tool prunes it.
	switch {
	case o.NamespaceGone:
		return Decision{Action: Finish}
	case o.ArgoCD && len(o.Applications) > 0:
		// The foundation Application's finalizer deletes the namespace once the root
		// Application pruned it; Argo CD's root does not prune its last Application
		// unless allowed to empty the cluster (allowEmpty).
		return wait("waiting for Argo CD to prune Applications " + strings.Join(o.Applications, ", ") + " and Namespace " +
			o.Namespace + " (a root Application without allowEmpty keeps the last tenant of its tree)")
	}
	return wait("waiting for Namespace " + o.Namespace + " to be pruned")
}

// applied says whether the delivery object applied the last published step. One that
// is not there has applied nothing: the saga waits, unless the namespace is gone too
// (nothing is left to order).
func applied(o Observed, d Delivery) (bool, string) {
	switch {
	case d.Applied:
		return true, ""
	case !d.Found:
		return o.NamespaceGone, "waiting for " + d.Name + " to exist and apply " + o.Revision
	}
	return false, "waiting for " + d.Name + " to apply " + o.Revision
}
