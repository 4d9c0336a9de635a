package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/tenant"
)

// readingReader is the operator's uncached reader with its reads of one tenant
// namespace's objects logged.
type readingReader struct {
	client.Reader
	log *writeLog
}

func (r readingReader) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	o.SetNamespace(key.Namespace)
	o.SetName(key.Name)
	defer r.log.add("get", o)()
	return r.Reader.Get(ctx, key, o, opts...)
}

// TestDriftOfObjectsCachedAsStatus: the kinds whose cache keeps their status and little
// else (statusKinds) are read from the API server at a drift check only when what Eva
// applies to them may have changed (driftVersion), not after every status write of
// another controller. The stand-ins write the status of the tenant's releases, streams
// and Ingress after the operator applies them; at the next drift check a release
// stripped of one of its labels and a stream whose spec was edited are each read and
// re-applied, and nothing else of those kinds is read or written.
func TestDriftOfObjectsCachedAsStatus(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	tenantNS := tenant.Namespace("STATNS")
	writes, reads := &writeLog{ns: tenantNS}, &writeLog{ns: tenantNS}
	clock := &testClock{}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.Client = recordingClient{r.Client, writes}
		r.APIReader = readingReader{r.APIReader, reads}
		r.Now = clock.now
	})
	tn := newTenant(ns, "STATNS", evav1.TierStarter)
	createTenant(t, tn)
	startStandIn(t)
	got := waitPhase(t, tn, evav1.PhaseActive)
	writesBefore, readsBefore := writes.list(), reads.list()

	var hr helmv2.HelmRelease
	if err := k8s.Get(ctx, refKey(t, got, "HelmRelease"), &hr); err != nil {
		t.Fatal(err)
	}
	if hr.Status.ObservedGeneration != hr.Generation {
		t.Fatalf("the stand-in has not written the status of HelmRelease %s", hr.Name)
	}
	label := ""
	for _, k := range slices.Sorted(maps.Keys(hr.Labels)) {
		if k != tenant.LabelCapsule {
			label = k
			break
		}
	}
	if label == "" {
		t.Fatalf("HelmRelease %s has no label but the capsule's: %v", hr.Name, hr.Labels)
	}
	wantLabel := hr.Labels[label]
	delete(hr.Labels, label)
	if err := k8s.Update(ctx, &hr, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	var stream nackv1beta2.Stream
	if err := k8s.Get(ctx, refKey(t, got, "Stream"), &stream); err != nil {
		t.Fatal(err)
	}
	wantDescription := stream.Spec.Description
	stream.Spec.Description = "edited by hand"
	if err := k8s.Update(ctx, &stream, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}

	clock.advance(ResyncActive + time.Minute)
	poke(t, tn, "1") // stands for the resync timer, which runs on the real clock
	wantWrites := []string{"patch HelmRelease " + hr.Name, "patch Stream " + stream.Name}
	eventually(t, time.Minute, "the drifted objects re-applied", func() error {
		if w := writtenSince(writesBefore, writes.list()); !slices.Equal(w, wantWrites) {
			return fmt.Errorf("writes %v, want %v", w, wantWrites)
		}
		return nil
	})
	consistently(t, "nothing more written", func() error {
		if w := writtenSince(writesBefore, writes.list()); len(w) != len(wantWrites) {
			return fmt.Errorf("writes %v", w)
		}
		return nil
	})
	// Of the kinds cached as their status, the two edited objects alone were read.
	statusReads := ofStatusKinds(writtenSince(readsBefore, reads.list()))
	wantReads := slices.Sorted(slices.Values([]string{"get *v2.HelmRelease " + hr.Name, "get *v1beta2.Stream " + stream.Name}))
	if !slices.Equal(statusReads, wantReads) {
		t.Errorf("read from the API server %v, want %v", statusReads, wantReads)
	}

	if err := k8s.Get(ctx, types.NamespacedName{Namespace: hr.Namespace, Name: hr.Name}, &hr); err != nil {
		t.Fatal(err)
	}
	if hr.Labels[label] != wantLabel {
		t.Errorf("HelmRelease label %s = %q, want %q", label, hr.Labels[label], wantLabel)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: stream.Namespace, Name: stream.Name}, &stream); err != nil {
		t.Fatal(err)
	}
	if stream.Spec.Description != wantDescription {
		t.Errorf("Stream description %q, want %q", stream.Spec.Description, wantDescription)
	}
}

// TestStatusKindsReadOnceAfterRestart: a restarted operator, whose memo is empty, reads
// each release, stream and Ingress of an Active tenant from the API server once, at its
// first look, and at the drift check after that none.
func TestStatusKindsReadOnceAfterRestart(t *testing.T) {
	ns := newTestNamespace(t)
	tenantNS := tenant.Namespace("RESTNS")
	op := startOperator(t, "")
	tn := newTenant(ns, "RESTNS", evav1.TierStarter)
	createTenant(t, tn)
	startStandIn(t)
	got := waitPhase(t, tn, evav1.PhaseActive)
	op.stop()

	reads := &writeLog{ns: tenantNS}
	clock := &testClock{}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.APIReader = readingReader{r.APIReader, reads}
		r.Now = clock.now
	})
	statusReads := func() []string { return ofStatusKinds(reads.list()) }
	want := 0
	for _, ref := range got.Status.Inventory {
		if ref.Kind == "HelmRelease" || ref.Kind == "Stream" || ref.Kind == "Ingress" {
			want++
		}
	}
	eventually(t, waitFor, "the first look", func() error {
		if n := len(statusReads()); n != want {
			return fmt.Errorf("%d reads, want %d", n, want)
		}
		return nil
	})
	clock.advance(ResyncActive + time.Minute)
	poke(t, tn, "1") // stands for the resync timer, which runs on the real clock
	consistently(t, "no read at the next check", func() error {
		if r := statusReads(); len(r) != want {
			return fmt.Errorf("%d reads, want %d: %v", len(r), want, r)
		}
		return nil
	})
}

// ofStatusKinds keeps the log entries about the statusKinds.
func ofStatusKinds(entries []string) []string {
	return slices.DeleteFunc(entries, func(e string) bool {
		return !strings.Contains(e, "HelmRelease") && !strings.Contains(e, "Stream") && !strings.Contains(e, "Ingress")
	})
}
