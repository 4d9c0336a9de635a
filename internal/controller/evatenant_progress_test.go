package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// A provisioning tenant's progress is written at most once per ProgressInterval: a
// release whose status helm-controller changes every half second does not cost a write
// of the tenant's status each time. What the release last said still reaches the
// tenant, and Active is written as soon as it is seen.
func TestProgressWrittenAtMostOncePerInterval(t *testing.T) {
	startOperator(t, "")
	ctx := context.Background()
	ns := newTestNamespace(t)
	tn := newTenant(ns, "PROGRS", evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseProvisioning)
	var releases helmv2.HelmReleaseList
	eventually(t, waitFor, "the tenant's HelmReleases", func() error {
		if err := k8s.List(ctx, &releases, client.InNamespace(tenant.Namespace(tn.Spec.CapsuleCode))); err != nil {
			return err
		}
		if len(releases.Items) == 0 {
			return errNot("applied")
		}
		return nil
	})

	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &evav1.EvaTenantList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: getTenant(t, tn).ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// helm-controller's progress: a new Ready message every half second.
	const changes = 8
	start := time.Now()
	hr := releases.Items[0]
	last := ""
	for i := range changes {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(&hr), &hr); err != nil {
			t.Fatal(err)
		}
		last = fmt.Sprintf("install step %d of %d", i+1, changes)
		apimeta.SetStatusCondition(&hr.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown,
			Reason: "Progressing", Message: last, ObservedGeneration: hr.Generation})
		if err := k8s.Status().Update(ctx, &hr); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	elapsed := time.Since(start)
	// The writes made while it changed: the watch's events until it is quiet for a second.
	writes := 0
	for quiet := false; !quiet; {
		select {
		case e := <-w.ResultChan():
			if e.Type == watch.Modified {
				writes++
			}
		case <-time.After(time.Second):
			quiet = true
		}
	}
	// One write at most per interval begun while the releases changed.
	if allowed := 1 + int(elapsed/ProgressInterval); writes > allowed {
		t.Errorf("%d writes of the tenant in %s of progress; want at most %d (one per %s)", writes, elapsed.Round(time.Second), allowed, ProgressInterval)
	}

	eventually(t, waitFor, "the release's last message on the tenant", func() error {
		if c := condition(getTenant(t, tn), evav1.ConditionModulesDeployed); !strings.Contains(c.Message, last) {
			return fmt.Errorf("ModulesDeployed says %q", c.Message)
		}
		return nil
	})
	startStandIn(t)
	waitPhase(t, tn, evav1.PhaseActive)
}
