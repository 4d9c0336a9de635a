package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func release(waves ...evav1.RolloutWave) *evav1.EvaRollout {
	r := &evav1.EvaRollout{Spec: evav1.EvaRolloutSpec{Versions: map[string]evav1.ModuleVersion{"crm": "1.5.0"}, Waves: waves}}
	r.Name, r.Generation = "r1", 1
	return r
}

func wave(n int32, maxUpdate int, bake time.Duration) evav1.RolloutWave {
	mu := intstr.FromInt32(int32(maxUpdate))
	return evav1.RolloutWave{Wave: n, MaxUpdate: &mu, BakeTime: metav1.Duration{Duration: bake}}
}

// fleet is a world of tenants that become Ready on a release one step after they are
// admitted, unless told to fail.
type fleet struct {
	tenants []Tenant
	failing map[string]bool
}

func newFleet(perWave int) *fleet {
	f := &fleet{failing: map[string]bool{}}
	for w := int32(1); w <= 3; w++ {
		for i := range perWave {
			code := fmt.Sprintf("W%dT%02d", w, i)
			code = strings.Repeat("X", 6-len(code)) + code
			f.tenants = append(f.tenants, Tenant{Code: code, Name: strings.ToLower(code),
				Tier: evav1.TierStarter, Wave: w, Ready: true})
		}
	}
	return f
}

// step applies a decision to the world: admitted tenants start updating (not Ready);
// tenants updating since the previous step become Ready, or Failed.
func (f *fleet) step(r *evav1.EvaRollout) {
	for i := range f.tenants {
		t := &f.tenants[i]
		if t.OnRelease && !t.Ready && !t.Failed {
			if f.failing[t.Code] {
				t.Failed, t.FailedAt, t.Message = true, t0.Add(time.Hour), "crm: InstallFailed"
			} else {
				t.Ready = true
			}
		}
		if AdmissionOf(r, t.Name, t.UID) != nil && !t.OnRelease {
			t.OnRelease, t.Ready = true, false
		}
	}
}

func run(t *testing.T, r *evav1.EvaRollout, f *fleet, steps int, every time.Duration) []Decision {
	t.Helper()
	var out []Decision
	now := t0
	for range steps {
		d := Plan(r, f.tenants, Delivery{}, "", now)
		r.Status = d.Status
		out = append(out, d)
		f.step(r)
		now = now.Add(every)
	}
	return out
}

func TestWavesGoInOrderOneAtATime(t *testing.T) {
	r := release(wave(1, 1, time.Minute), wave(2, 1, time.Minute), wave(3, 2, 0))
	f := newFleet(3)
	ds := run(t, r, f, 40, 20*time.Second)
	if r.Status.Phase != evav1.RolloutComplete || r.Status.Updated != 9 || r.Status.Total != 9 {
		t.Fatalf("after 40 steps: %s, %d/%d: %s", r.Status.Phase, r.Status.Updated, r.Status.Total, r.Status.Message)
	}
	completed := map[int32]time.Time{}
	for i, ws := range r.Status.Waves {
		completed[ws.Wave] = ws.CompletedAt.Time
		if baked, want := ws.CompletedAt.Sub(ws.BakeStartedAt.Time), r.Spec.Waves[i].BakeTime.Duration; baked < want {
			t.Errorf("wave %d baked %s, less than its bake time %s", ws.Wave, baked, want)
		}
		for _, e := range ws.Updated {
			if e.ReadyAt == nil || ws.BakeStartedAt.Before(e.ReadyAt) {
				t.Errorf("wave %d started baking at %s, before %s was Ready (%v)", ws.Wave, ws.BakeStartedAt, e.Code, e.ReadyAt)
			}
		}
	}
	for _, ws := range r.Status.Waves {
		for _, e := range ws.Updated {
			if prev := completed[ws.Wave-1]; ws.Wave > 1 && e.AdmittedAt.Time.Before(prev) {
				t.Errorf("%s (wave %d) admitted at %s, before wave %d completed at %s", e.Code, ws.Wave, e.AdmittedAt, ws.Wave-1, prev)
			}
		}
	}
	for i, d := range ds {
		perWave := map[int32]int{}
		for _, a := range d.Admitted {
			perWave[a.Wave]++
		}
		if perWave[1] > 1 || perWave[2] > 1 || perWave[3] > 2 {
			t.Errorf("step %d admitted %v, more than maxUpdate", i, perWave)
		}
	}
}

func TestMaxUpdateCountsUpdatingTenants(t *testing.T) {
	r := release(wave(1, 1, 0))
	f := newFleet(3)
	// Nobody becomes Ready: only the first tenant may ever be admitted.
	now := t0
	for range 5 {
		d := Plan(r, f.tenants, Delivery{}, "", now)
		r.Status = d.Status
		for i := range f.tenants {
			if Admitted(r, f.tenants[i].Name) {
				f.tenants[i].OnRelease, f.tenants[i].Ready = true, false
			}
		}
		now = now.Add(time.Second)
	}
	if n := len(r.Status.Waves[0].Updated); n != 1 {
		t.Fatalf("%d tenants admitted while the first never became Ready, want 1", n)
	}
}

func TestFailedTenantHaltsAndAFixedTenantResumes(t *testing.T) {
	r := release(wave(1, 3, 0), wave(2, 3, 0), wave(3, 3, 0))
	r.Spec.Gates.OnTenantFailure = evav1.TenantFailureHalt
	f := newFleet(3)
	f.failing["XW1T01"] = true
	ds := run(t, r, f, 6, 10*time.Second)
	if r.Status.Phase != evav1.RolloutHalted || !strings.Contains(r.Status.Message, "XW1T01 Failed: crm: InstallFailed") {
		t.Fatalf("phase %s, message %q; want Halted naming XW1T01", r.Status.Phase, r.Status.Message)
	}
	if len(r.Status.Waves[1].Updated)+len(r.Status.Waves[2].Updated) != 0 {
		t.Fatalf("waves 2 and 3 admitted tenants while wave 1 was halted: %+v", r.Status.Waves[1:])
	}
	halted := 0
	for _, d := range ds {
		for _, e := range d.Events {
			if e.Reason == "RolloutHalted" {
				halted++
			}
		}
	}
	if halted != 1 {
		t.Errorf("%d RolloutHalted events, want 1", halted)
	}
	// The tenant recovers (its chart fixed): the rollout goes on.
	delete(f.failing, "XW1T01")
	for i := range f.tenants {
		if f.tenants[i].Code == "XW1T01" {
			f.tenants[i].Failed, f.tenants[i].Ready = false, true
		}
	}
	run(t, r, f, 10, 10*time.Second)
	if r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("after recovery: %s: %s", r.Status.Phase, r.Status.Message)
	}
}

func TestReadyTimeoutHalts(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(1)
	d := Plan(r, f.tenants, Delivery{}, "", t0)
	r.Status = d.Status
	f.tenants[0].OnRelease, f.tenants[0].Ready = true, false // updating, never Ready
	// The first look after the admission sees the release reach the tenant: the
	// timeout counts from then.
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0.Add(2*time.Second)).Status
	if e := Admission(r, "xw1t00"); e.ReachedAt == nil || !e.ReachedAt.Time.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("reachedAt %v, want the first look after the admission", e.ReachedAt)
	}
	d = Plan(r, f.tenants, Delivery{}, "", t0.Add(61*time.Second))
	if d.Status.Phase != evav1.RolloutProgressing || d.RequeueAfter > time.Second+time.Millisecond {
		t.Fatalf("before the timeout: %s, requeue %s", d.Status.Phase, d.RequeueAfter)
	}
	d = Plan(r, f.tenants, Delivery{}, "", t0.Add(63*time.Second))
	if d.Status.Phase != evav1.RolloutHalted || !strings.Contains(d.Status.Message, "not Ready on the release within 1m0s") {
		t.Fatalf("after the timeout: %s: %s", d.Status.Phase, d.Status.Message)
	}
}

func TestFrozenTenantIsSkippedAndReported(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0), wave(3, 1, 0))
	f := newFleet(2)
	f.tenants[2].Frozen = "quarter-end close" // XW2T00
	run(t, r, f, 30, 10*time.Second)
	if r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	if Admitted(r, "xw2t00") {
		t.Fatal("the frozen tenant was admitted")
	}
	skipped := r.Status.Waves[1].Skipped
	if len(skipped) != 1 || skipped[0].Code != "XW2T00" || skipped[0].Reason != "frozen: quarter-end close" {
		t.Fatalf("wave 2 skipped %+v", skipped)
	}
	if r.Status.Updated != 5 || r.Status.Total != 6 {
		t.Errorf("updated %d of %d, want 5 of 6", r.Status.Updated, r.Status.Total)
	}
}

func TestFrozenWaveAndPauseStopAdmission(t *testing.T) {
	r := release(wave(1, 3, 0), wave(2, 3, 0))
	r.Spec.Waves[1].Frozen = "pilot customers' release freeze"
	f := newFleet(2)
	run(t, r, f, 10, 10*time.Second)
	if r.Status.Phase != evav1.RolloutPaused || r.Status.CurrentWave != 2 || len(r.Status.Waves[1].Updated) != 0 {
		t.Fatalf("%s in wave %d, wave 2 updated %v: %s", r.Status.Phase, r.Status.CurrentWave, r.Status.Waves[1].Updated, r.Status.Message)
	}
	r2 := release(wave(1, 3, 0))
	r2.Spec.Paused = true
	d := Plan(r2, newFleet(2).tenants, Delivery{}, "", t0)
	if d.Status.Phase != evav1.RolloutPaused || len(d.Admitted) != 0 {
		t.Fatalf("paused: %s, admitted %d", d.Status.Phase, len(d.Admitted))
	}
}

func TestSupersededAdmitsNothing(t *testing.T) {
	r := release(wave(1, 3, 0))
	d := Plan(r, newFleet(1).tenants, Delivery{}, "r2", t0)
	if d.Status.Phase != evav1.RolloutSuperseded || len(d.Admitted) != 0 {
		t.Fatalf("%s, admitted %d", d.Status.Phase, len(d.Admitted))
	}
}

func TestLateTenantOfAFinishedWaveIsAdmitted(t *testing.T) {
	r := release(wave(1, 1, 0))
	f := newFleet(1)
	run(t, r, f, 5, 10*time.Second)
	if r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	f.tenants = append(f.tenants, Tenant{Code: "LATECO", Name: "late", Wave: 1, Ready: true})
	d := Plan(r, f.tenants, Delivery{}, "", t0.Add(time.Hour))
	if len(d.Admitted) != 1 || d.Admitted[0].Code != "LATECO" {
		t.Fatalf("admitted %+v", d.Admitted)
	}
}

// ReleaseOf is the newest rollout of namespace that admitted the tenant name (what its
// status.release says), nil when none did.
func ReleaseOf(rollouts []evav1.EvaRollout, namespace, name string) *evav1.EvaRollout {
	rels := Releases(rollouts, namespace, name, "")
	if len(rels) == 0 {
		return nil
	}
	return rels[len(rels)-1]
}

func TestReleaseOfAndWithRelease(t *testing.T) {
	old, fixed := release(wave(1, 1, 0)), release(wave(1, 1, 0))
	old.Name, fixed.Name = "crm-1-5", "crm-1-6"
	old.Namespace, fixed.Namespace = "tenants", "tenants"
	old.CreationTimestamp, fixed.CreationTimestamp = metav1.NewTime(t0), metav1.NewTime(t0.Add(time.Minute))
	fixed.Spec.Versions = map[string]evav1.ModuleVersion{"crm": "1.6.0", "itsm": "2.0.0"}
	admit := func(r *evav1.EvaRollout, name string) {
		r.Status.Waves = []evav1.WaveStatus{{Wave: 1, Updated: []evav1.RolloutTenant{{Name: name}}}}
	}
	admit(old, "acme")
	if got := ReleaseOf([]evav1.EvaRollout{*fixed, *old}, "tenants", "acme"); got == nil || got.Name != "crm-1-5" {
		t.Fatalf("release of acme: %v", got)
	}
	admit(fixed, "acme")
	got := ReleaseOf([]evav1.EvaRollout{*old, *fixed}, "tenants", "acme")
	if got == nil || got.Name != "crm-1-6" {
		t.Fatalf("release of acme after the fix reached it: %v", got)
	}
	if ReleaseOf([]evav1.EvaRollout{*old, *fixed}, "tenants", "other") != nil {
		t.Fatal("a tenant no release reached has a release")
	}
	if ReleaseOf([]evav1.EvaRollout{*old, *fixed}, "elsewhere", "acme") != nil {
		t.Fatal("a rollout reached a tenant of another namespace")
	}
	tn := &evav1.EvaTenant{Spec: evav1.EvaTenantSpec{Versions: map[string]evav1.ModuleVersion{"itsm": "1.0.0"}}}
	w := WithReleases(tn, []*evav1.EvaRollout{got}, []string{"crm", "itsm", "shell"})
	if w.Spec.Versions["crm"] != "1.6.0" || w.Spec.Versions["itsm"] != "1.0.0" || len(w.Spec.Versions) != 2 {
		t.Fatalf("versions on the release: %v (the pin must win, shell is not in the release)", w.Spec.Versions)
	}
	if len(tn.Spec.Versions) != 1 {
		t.Fatal("WithReleases changed the tenant it was given")
	}
}

func TestFailedBeforeTheReleaseIsJudgedByItsTimeout(t *testing.T) {
	r := release(wave(1, 1, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(1)
	f.tenants[0].Failed, f.tenants[0].FailedAt, f.tenants[0].Message = true, t0.Add(-time.Hour), "old failure"
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0).Status
	// The write that records the release still carries the old Failed phase.
	f.tenants[0].OnRelease, f.tenants[0].Ready = true, false
	if d := Plan(r, f.tenants, Delivery{}, "", t0.Add(10*time.Second)); d.Status.Phase == evav1.RolloutHalted {
		t.Fatalf("halted on a failure older than the release: %s", d.Status.Message)
	}
	f.tenants[0].FailedAt = t0.Add(20 * time.Second)
	if d := Plan(r, f.tenants, Delivery{}, "", t0.Add(30*time.Second)); d.Status.Phase != evav1.RolloutHalted {
		t.Fatalf("a failure on the release did not halt: %s: %s", d.Status.Phase, d.Status.Message)
	}
}

func TestReleasesAddUpAndHoldWhatTheyProvide(t *testing.T) {
	at := func(name string, minute int, versions map[string]evav1.ModuleVersion, admitted ...string) evav1.EvaRollout {
		r := evav1.EvaRollout{Spec: evav1.EvaRolloutSpec{Versions: versions}}
		r.Name, r.Namespace, r.CreationTimestamp = name, "tenants", metav1.NewTime(t0.Add(time.Duration(minute)*time.Minute))
		ws := evav1.WaveStatus{Wave: 1}
		for _, n := range admitted {
			ws.Updated = append(ws.Updated, evav1.RolloutTenant{Name: n})
		}
		r.Status.Waves = []evav1.WaveStatus{ws}
		return r
	}
	crm := at("crm-1-5", 0, map[string]evav1.ModuleVersion{"crm": "1.5.0"}, "acme", "beta")
	itsm := at("itsm-2", 1, map[string]evav1.ModuleVersion{"itsm": "2.0.0"}, "acme")
	all := []evav1.EvaRollout{itsm, crm}
	tn := &evav1.EvaTenant{}
	got := WithReleases(tn, Releases(all, "tenants", "acme", ""), []string{"crm", "itsm"})
	if got.Spec.Versions["crm"] != "1.5.0" || got.Spec.Versions["itsm"] != "2.0.0" {
		t.Fatalf("acme on both releases renders %v: the itsm release took back crm", got.Spec.Versions)
	}
	if r := ReleaseOf(all, "tenants", "acme"); r == nil || r.Name != "itsm-2" {
		t.Fatalf("acme's release: %v", r)
	}
	if !Needed(all, &crm, "acme", "") || !Needed(all, &crm, "beta", "") || Needed(all, &itsm, "beta", "") {
		t.Fatal("crm-1-5 provides crm to acme and beta; itsm-2 never reached beta")
	}
	crm16 := at("crm-1-6", 2, map[string]evav1.ModuleVersion{"crm": "1.6.0"}, "acme", "beta")
	all = append(all, crm16)
	if Needed(all, &crm, "acme", "") || Needed(all, &crm, "beta", "") {
		t.Fatal("crm-1-5 still needed once crm-1-6 reached both tenants")
	}
	if !Needed(all, &itsm, "acme", "") {
		t.Fatal("itsm-2 still provides acme's itsm")
	}
	if v := WithReleases(tn, Releases(all, "tenants", "acme", ""), []string{"crm", "itsm"}).Spec.Versions; v["crm"] != "1.6.0" || v["itsm"] != "2.0.0" {
		t.Fatalf("acme renders %v", v)
	}
}

// A tenant not Ready before the release (an impostor refused, a tenant failing on its
// own values) would fail any release and halt it for the namespace: it is passed over,
// named with its reason, and admitted once Ready.
func TestNotReadyTenantIsPassedOverUntilReady(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	f := newFleet(2)
	f.tenants[0].Ready, f.tenants[0].Message = false, "Stalled: CapsuleCodeInUse: code claimed by eva-system/globex" // XW1T00
	run(t, r, f, 12, 10*time.Second)
	if r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	if Admitted(r, "xw1t00") {
		t.Fatal("a tenant not Ready before the release was admitted")
	}
	if s := r.Status.Waves[0].Skipped; len(s) != 1 || s[0].Code != "XW1T00" || !strings.Contains(s[0].Reason, "not Ready before the release: Stalled: CapsuleCodeInUse") {
		t.Fatalf("wave 1 skipped %+v", s)
	}
	f.tenants[0].Ready = true
	run(t, r, f, 1, 10*time.Second)
	if !Admitted(r, "xw1t00") || len(r.Status.Waves[0].Skipped) != 0 {
		t.Fatalf("the tenant, Ready now, was not admitted to its finished wave: %+v", r.Status.Waves[0])
	}
}

// A tenant failing on an older release that admitted it is what a newer release rolls
// forward: it is admitted.
func TestTenantFailingOnAnOlderReleaseIsRolledForward(t *testing.T) {
	r := release(wave(1, 2, 0))
	f := newFleet(1)
	f.tenants[0].Ready, f.tenants[0].Failed, f.tenants[0].OnOlderRelease = false, true, true
	d := Plan(r, f.tenants, Delivery{}, "", t0)
	if len(d.Admitted) != 1 {
		t.Fatalf("admitted %d, want the tenant failing on the older release", len(d.Admitted))
	}
}

// What a tenant's owner does after the admission (a spec change, a freeze) is not the
// release's doing: it neither halts the rollout nor proves the release. The wave
// admits its next tenant, and goes on once that one is Ready on the release.
func TestOwnerChangesAfterAdmissionAreNotJudged(t *testing.T) {
	for _, change := range []struct {
		name   string
		apply  func(*Tenant)
		reason string
	}{
		{"spec changed", func(t *Tenant) { t.Generation = 8 }, "its spec changed since its admission (generation 7, then 8)"},
		{"frozen", func(t *Tenant) { t.Frozen = "audit" }, "frozen since its admission"},
	} {
		t.Run(change.name, func(t *testing.T) {
			r := release(wave(1, 1, 0), wave(2, 1, 0))
			r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
			f := newFleet(2)
			f.tenants[0].Generation = 7
			r.Status = Plan(r, f.tenants, Delivery{}, "", t0).Status
			if e := Admission(r, "xw1t00"); e == nil || e.Generation != 7 {
				t.Fatalf("admission %+v, want generation 7 recorded", e)
			}
			f.tenants[0].OnRelease, f.tenants[0].Ready = true, false
			change.apply(&f.tenants[0])
			f.tenants[0].Failed, f.tenants[0].FailedAt, f.tenants[0].Message = true, t0.Add(time.Second), "ValuesError"
			d := Plan(r, f.tenants, Delivery{}, "", t0.Add(2*time.Minute))
			if d.Status.Phase == evav1.RolloutHalted {
				t.Fatalf("halted on the owner's change: %s", d.Status.Message)
			}
			if got := d.Status.Waves[0].Updated[0].Reason; got != change.reason {
				t.Errorf("reason %q, want %q", got, change.reason)
			}
			if !Admitted(&evav1.EvaRollout{Status: d.Status}, "xw1t01") || Admitted(&evav1.EvaRollout{Status: d.Status}, "xw2t00") {
				t.Fatalf("the unjudged canary: want the wave's next tenant admitted, wave 2 not yet: %+v", d.Status.Waves)
			}
			r.Status = d.Status
			run(t, r, f, 4, 10*time.Second)
			if !Admitted(r, "xw2t00") {
				t.Errorf("wave 2 did not start once xw1t01 was Ready: %s: %s", r.Status.Phase, r.Status.Message)
			}
		})
	}
}

// A tenant once Ready on the release and not any more is timed again from then: it
// halts the rollout instead of holding it for ever.
func TestReadyThenNotReadyIsTimedAgain(t *testing.T) {
	r := release(wave(1, 1, time.Hour), wave(2, 1, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(1)
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0).Status
	f.tenants[0].OnRelease = true
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0.Add(10*time.Second)).Status
	if r.Status.Phase != evav1.RolloutBaking {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	f.tenants[0].Ready, f.tenants[0].NotReadySince = false, t0.Add(20*time.Second)
	if d := Plan(r, f.tenants, Delivery{}, "", t0.Add(79*time.Second)); d.Status.Phase != evav1.RolloutProgressing {
		t.Fatalf("within the timeout: %s: %s", d.Status.Phase, d.Status.Message)
	}
	d := Plan(r, f.tenants, Delivery{}, "", t0.Add(81*time.Second))
	if d.Status.Phase != evav1.RolloutHalted || !strings.Contains(d.Status.Message, "XW1T00 not Ready on the release for more than 1m0s since") {
		t.Fatalf("after the timeout: %s: %s", d.Status.Phase, d.Status.Message)
	}
}

func TestOnOlderRelease(t *testing.T) {
	older := evav1.EvaRollout{ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: metav1.NewTime(t0)},
		Status: evav1.EvaRolloutStatus{Waves: []evav1.WaveStatus{{Updated: []evav1.RolloutTenant{{Name: "x", Generation: 3}}}}}}
	newer := evav1.EvaRollout{ObjectMeta: metav1.ObjectMeta{Name: "b", CreationTimestamp: metav1.NewTime(t0.Add(time.Minute))}}
	all := []evav1.EvaRollout{older, newer}
	if !OnOlderRelease(all, &newer, "x", "", 3) {
		t.Error("admitted by the older release at this generation: not seen")
	}
	if OnOlderRelease(all, &newer, "x", "", 4) {
		t.Error("changed since the older release admitted it: still counted as its doing")
	}
	if OnOlderRelease(all, &older, "x", "", 3) || OnOlderRelease(all, &newer, "y", "", 1) {
		t.Error("a release is not older than itself; a tenant no release admitted is on none")
	}
}

// On the pull-request path the admission is a commit waiting for review: a tenant the
// release has not reached yet is waited for, not timed, however long that takes.
func TestPendingTenantIsNotTimed(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(1)
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0).Status
	f.tenants[0].Pending = true
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0.Add(3*time.Hour)).Status
	if r.Status.Phase != evav1.RolloutProgressing || Admission(r, "xw1t00").ReachedAt != nil {
		t.Fatalf("pending for 3h: %s: %s", r.Status.Phase, r.Status.Message)
	}
	f.tenants[0].Pending, f.tenants[0].OnRelease, f.tenants[0].Ready = false, true, false
	r.Status = Plan(r, f.tenants, Delivery{}, "", t0.Add(4*time.Hour)).Status
	if d := Plan(r, f.tenants, Delivery{}, "", t0.Add(4*time.Hour+59*time.Second)); d.Status.Phase != evav1.RolloutProgressing {
		t.Fatalf("within a minute of reaching it: %s: %s", d.Status.Phase, d.Status.Message)
	}
	if d := Plan(r, f.tenants, Delivery{}, "", t0.Add(4*time.Hour+61*time.Second)); d.Status.Phase != evav1.RolloutHalted {
		t.Fatalf("a minute after reaching it: %s: %s", d.Status.Phase, d.Status.Message)
	}
}

// The queue-depth gate holds the rollout while a tenant it updated has a backlog above
// the limit, and lets it go on once drained; a depth not measured is not checked.
func TestQueueDepthGate(t *testing.T) {
	r := release(wave(1, 1, time.Minute), wave(2, 1, 0))
	limit := int64(100)
	r.Spec.Gates.MaxQueueDepth = &limit
	f := newFleet(1)
	f.tenants[0].QueueDepth, f.tenants[0].QueueDepthKnown = 40, true
	run(t, r, f, 1, 10*time.Second) // admitted under the limit
	f.tenants[0].QueueDepth = 250   // the backlog grows on the release
	run(t, r, f, 3, 10*time.Second)
	if r.Status.Phase != evav1.RolloutHalted || !strings.Contains(r.Status.Message, "XW1T00 queue depth 250 above 100") {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	if Admitted(r, "xw2t00") {
		t.Fatal("wave 2 admitted while wave 1 was over the limit")
	}
	f.tenants[0].QueueDepth = 40
	run(t, r, f, 12, 10*time.Second)
	if r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("drained: %s: %s", r.Status.Phase, r.Status.Message)
	}
	unmeasured := release(wave(1, 1, 0))
	unmeasured.Spec.Gates.MaxQueueDepth = &limit
	g := newFleet(1)
	g.tenants[0].QueueDepth = 250 // QueueDepthKnown false: no NATS to measure it
	run(t, unmeasured, g, 4, 10*time.Second)
	if unmeasured.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("unmeasured: %s: %s", unmeasured.Status.Phase, unmeasured.Status.Message)
	}
}

// A tenant moved to another wave after its admission is not admitted again there.
func TestTenantMovedToALaterWaveIsAdmittedOnce(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	f := newFleet(1)
	run(t, r, f, 3, 10*time.Second) // XW1T00 admitted and Ready; wave 2 starts
	f.tenants[0].Wave = 2
	run(t, r, f, 6, 10*time.Second)
	n := 0
	for _, ws := range r.Status.Waves {
		for _, e := range ws.Updated {
			if e.Name == "xw1t00" {
				n++
			}
		}
	}
	if n != 1 || r.Status.Updated > r.Status.Total {
		t.Fatalf("admitted %d times; %d updated of %d", n, r.Status.Updated, r.Status.Total)
	}
}

// A tenant already over the queue-depth limit is passed over, not admitted to halt.
func TestTenantOverQueueDepthBeforeTheReleaseIsPassedOver(t *testing.T) {
	r := release(wave(1, 2, 0))
	limit := int64(10)
	r.Spec.Gates.MaxQueueDepth = &limit
	f := newFleet(2)
	f.tenants[0].QueueDepth, f.tenants[0].QueueDepthKnown = 50, true
	run(t, r, f, 4, 10*time.Second)
	if r.Status.Phase != evav1.RolloutComplete || Admitted(r, "xw1t00") {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	if s := r.Status.Waves[0].Skipped; len(s) != 1 || s[0].Reason != "queue depth 50 above 10 before the release" {
		t.Fatalf("skipped %+v", s)
	}
}

// A wave none of whose tenants may take the release (not Ready before it) is passed
// over, not waited on: the next wave proves the release, and the tenants passed over
// are admitted as they recover.
func TestWaveWithNoAdmissibleTenantIsPassedOver(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	f := newFleet(2)
	f.tenants[0].Ready, f.tenants[1].Ready = false, false
	ds := run(t, r, f, 6, 10*time.Second)
	if !r.Status.Waves[0].PassedOver || r.Status.Phase != evav1.RolloutComplete || !Admitted(r, "xw2t01") {
		t.Fatalf("%s wave %d: %s; waves %+v", r.Status.Phase, r.Status.CurrentWave, r.Status.Message, r.Status.Waves)
	}
	if n := countEvents(ds, "WavePassedOver"); n != 1 {
		t.Errorf("%d WavePassedOver events, want 1", n)
	}
	f.tenants[1].Ready = true // recovers: the release, proven on wave 2, reaches it
	run(t, r, f, 1, 10*time.Second)
	if !Admitted(r, "xw1t01") || Admitted(r, "xw1t00") {
		t.Fatalf("recovered tenant of the passed wave: %+v", r.Status.Waves[0])
	}
}

// A fleet none of whose tenants may take the release passes over every wave but does
// not complete: nothing proved the release. The first tenant to recover takes it up
// in its wave, gated as any other.
func TestUnhealthyFleetDoesNotComplete(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	f := newFleet(1)
	for i := range f.tenants {
		f.tenants[i].Ready = false
	}
	run(t, r, f, 3, 10*time.Second)
	if r.Status.Phase != evav1.RolloutProgressing || !strings.Contains(r.Status.Message, "every wave passed over") {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	f.tenants[1].Ready = true // xw2t00
	d := Plan(r, f.tenants, Delivery{}, "", t0.Add(time.Minute))
	if len(d.Admitted) != 1 || d.Admitted[0].Code != "XW2T00" || d.Status.CurrentWave != 2 || d.Status.Waves[1].PassedOver {
		t.Fatalf("recovered tenant: admitted %+v, %s wave %d: %s", d.Admitted, d.Status.Phase, d.Status.CurrentWave, d.Status.Message)
	}
}

// A tenant deleted after its admission and created again under the same name (another
// UID, another wave, failing on its own values) is another tenant: it inherits nothing
// of the first one's admission (it does not render the release, and its failure does
// not halt the wave that admitted its namesake); it is admitted by its own wave only.
func TestTenantCreatedAgainUnderAnAdmittedNameIsAnotherTenant(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0), wave(3, 1, time.Hour))
	f := newFleet(1)
	for i := range f.tenants {
		f.tenants[i].UID = types.UID("uid-" + f.tenants[i].Code)
	}
	run(t, r, f, 1, time.Second)
	first := AdmissionOf(r, "xw1t00", "uid-XW1T00")
	if first == nil || first.UID != "uid-XW1T00" {
		t.Fatalf("wave 1's tenant not admitted by its UID: %+v", r.Status.Waves)
	}
	// Deleted, and created again in wave 3 with values that fail.
	f.tenants[0] = Tenant{Code: "XW1T00", Name: "xw1t00", UID: "uid-again", Tier: evav1.TierStarter, Wave: 3,
		Failed: true, FailedAt: t0, Message: "crm: InstallFailed"}
	if got := Releases([]evav1.EvaRollout{*r}, r.Namespace, "xw1t00", "uid-again"); len(got) != 0 {
		t.Errorf("the new tenant renders the release its namesake was admitted to")
	}
	run(t, r, f, 3, time.Second)
	if r.Status.Phase == evav1.RolloutHalted {
		t.Fatalf("the new tenant's own failure halted the rollout: %s", r.Status.Message)
	}
	if r.Status.CurrentWave != 3 || AdmissionOf(r, "xw1t00", "uid-again") != nil {
		t.Errorf("wave %d, %s: the new tenant is wave 3's, Failed before the release: passed over, not admitted", r.Status.CurrentWave, r.Status.Message)
	}
}
