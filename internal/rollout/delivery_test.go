package rollout

import (
	"strings"
	"testing"
	"time"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// shardedFleet is newFleet's first wave, ten Starter tenants costing two releases each,
// on two Flux shards in turn (s1, s2, s1, …).
func shardedFleet() *fleet {
	f := newFleet(10)
	f.tenants = f.tenants[:10]
	for i := range f.tenants {
		f.tenants[i].Releases, f.tenants[i].FluxShard = 2, []string{"s1", "s2"}[i%2]
	}
	return f
}

// inFlightByShard counts the releases of admitted tenants not yet Ready on the release.
func inFlightByShard(r *evav1.EvaRollout, f *fleet) map[string]int {
	out := map[string]int{}
	for _, tn := range f.tenants {
		if Admitted(r, tn.Name) && !(tn.OnRelease && tn.Ready) {
			out[tn.FluxShard] += tn.Releases
		}
	}
	return out
}

// TestAdmissionsWaitForTheFluxShard: maxUpdate allows the whole wave at once, but at one
// release a minute a shard installs five within the Starter ready timeout (5m): each
// shard takes two tenants (four releases) at a time, the status says why no more were
// admitted, and the wave still completes with every tenant.
func TestAdmissionsWaitForTheFluxShard(t *testing.T) {
	r := release(wave(1, 10, 0))
	f := shardedFleet()
	delivery := Delivery{ReleasesPerMinute: 1}
	now := t0
	sawCap := false
	for step := 0; step < 20 && r.Status.Phase != evav1.RolloutComplete; step++ {
		d := Plan(r, f.tenants, delivery, "", now)
		r.Status = d.Status
		if step == 0 && len(d.Admitted) != 4 {
			t.Fatalf("first decision admitted %d tenants, want 4 (two per shard): %s", len(d.Admitted), r.Status.Message)
		}
		for shard, n := range inFlightByShard(r, f) {
			if n > 5 {
				t.Fatalf("step %d: shard %s has %d releases in flight, more than the 5 it installs within 5m", step, shard, n)
			}
		}
		if strings.Contains(r.Status.Message, "admissions capped: 4 release(s) in flight on Flux shard s1's helm-controller, which installs 1 a minute (5 within readyTimeout 5m0s); XW1T04 (2 more) waits") {
			sawCap = true
		}
		f.step(r)
		now = now.Add(20 * time.Second)
	}
	if r.Status.Phase != evav1.RolloutComplete || r.Status.Updated != 10 {
		t.Fatalf("rollout %s with %d of 10 updated: %s", r.Status.Phase, r.Status.Updated, r.Status.Message)
	}
	if !sawCap {
		t.Error("the status never said admissions were capped by the Flux shard")
	}
}

// TestDeliveryLimits: no rate admits what maxUpdate allows; a tenant costing more than
// its shard installs within the timeout is admitted alone, once its shard is idle.
func TestDeliveryLimits(t *testing.T) {
	r := release(wave(1, 10, 0))
	if d := Plan(r, shardedFleet().tenants, Delivery{}, "", t0); len(d.Admitted) != 10 {
		t.Errorf("without a rate, %d admitted, want all 10", len(d.Admitted))
	}
	f := shardedFleet()
	for i := range f.tenants {
		f.tenants[i].FluxShard, f.tenants[i].Releases = "s1", 7
	}
	r = release(wave(1, 10, 0))
	for step := range 3 {
		d := Plan(r, f.tenants, Delivery{ReleasesPerMinute: 1}, "", t0.Add(time.Duration(step)*time.Second))
		r.Status = d.Status
		if len(d.Admitted) != 1 && step%2 == 0 || len(d.Admitted) != 0 && step%2 == 1 {
			t.Fatalf("step %d admitted %d; want one tenant at a time, each after the last is Ready", step, len(d.Admitted))
		}
		f.step(r)
	}
}
