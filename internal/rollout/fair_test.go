package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

func countEvents(ds []Decision, reason string) int {
	n := 0
	for _, d := range ds {
		for _, e := range d.Events {
			if e.Reason == reason {
				n++
			}
		}
	}
	return n
}

func admissionOf(r *evav1.EvaRollout, name string) evav1.RolloutTenant {
	if e := Admission(r, name); e != nil {
		return *e
	}
	return evav1.RolloutTenant{}
}

// A tenant failing on the release once the release was judged Ready on another tenant
// fails on its own (its values): it has until readyTimeout after the release reached
// it to recover, is then set aside (status and an event), and the later waves get the
// release.
func TestFailingTenantIsSetAsideOnceTheReleaseIsProven(t *testing.T) {
	r := release(wave(1, 3, 0), wave(2, 3, 0), wave(3, 3, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(3)
	f.failing["XW1T01"] = true
	ds := run(t, r, f, 3, 10*time.Second)
	if r.Status.Phase != evav1.RolloutProgressing || !strings.Contains(r.Status.Message, "XW1T01 (failing: XW1T01 Failed: crm: InstallFailed, set aside at") {
		t.Fatalf("within its timeout: %s: %s", r.Status.Phase, r.Status.Message)
	}
	ds = append(ds, run(t, r, f, 12, 10*time.Second)...)
	e := admissionOf(r, "xw1t01")
	if e.SetAsideAt == nil || !strings.HasPrefix(e.Reason, "set aside: XW1T01 Failed: crm: InstallFailed") {
		t.Fatalf("failing tenant's admission %+v, want set aside", e)
	}
	if r.Status.Phase != evav1.RolloutComplete || !Admitted(r, "xw3t02") {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	if n := countEvents(ds, "TenantSetAside"); n != 1 {
		t.Errorf("%d TenantSetAside events, want 1", n)
	}
	if n := countEvents(ds, "RolloutHalted"); n != 0 {
		t.Errorf("%d RolloutHalted events, want none", n)
	}
}

// The first tenant to fail, before the release was judged Ready on any other, may be
// failing on the release itself: it halts the rollout, whatever the policy.
func TestFailingCanaryHaltsBeforeTheReleaseIsProven(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(2)
	f.failing["XW1T00"] = true
	run(t, r, f, 20, 10*time.Second)
	if r.Status.Phase != evav1.RolloutHalted || Admitted(r, "xw1t01") || admissionOf(r, "xw1t00").SetAsideAt != nil {
		t.Fatalf("%s: %s; waves %+v", r.Status.Phase, r.Status.Message, r.Status.Waves)
	}
}

// A requester's tenant in wave 1 whose workload keeps a backlog once the release
// reaches it is set aside: the other tenants' waves get the release. A backlog it had
// when admitted (over a limit lowered since) is not the release's doing.
func TestBacklogGrownOnTheReleaseSetsTheTenantAside(t *testing.T) {
	r := release(wave(1, 2, 10*time.Second), wave(2, 3, 0), wave(3, 3, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	limit := int64(100)
	r.Spec.Gates.MaxQueueDepth = &limit
	f := newFleet(2)
	for i := range f.tenants {
		f.tenants[i].QueueDepthKnown = true
	}
	run(t, r, f, 1, 10*time.Second)
	f.tenants[0].QueueDepth = 5000 // XW1T00 (the requester's) keeps a backlog on the release
	run(t, r, f, 24, 10*time.Second)
	if e := admissionOf(r, "xw1t00"); e.SetAsideAt == nil || !strings.Contains(e.Reason, "queue depth 5000 above 100") {
		t.Fatalf("backlogged tenant %+v; %s: %s", e, r.Status.Phase, r.Status.Message)
	}
	if r.Status.Phase != evav1.RolloutComplete || !Admitted(r, "xw2t01") || !Admitted(r, "xw3t01") {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}

	lowered := release(wave(1, 1, 0))
	lowerable := int64(1000)
	lowered.Spec.Gates.MaxQueueDepth = &lowerable
	g := newFleet(1)
	g.tenants[0].QueueDepth, g.tenants[0].QueueDepthKnown = 500, true
	run(t, lowered, g, 1, 10*time.Second) // admitted under the limit of then
	lowerable = 10
	run(t, lowered, g, 3, 10*time.Second)
	if lowered.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("a backlog older than the release: %s: %s", lowered.Status.Phase, lowered.Status.Message)
	}
}

// A security release passes a tenant's own freeze, not the platform's (a frozen wave).
func TestSecurityReleasePassesATenantsFreeze(t *testing.T) {
	r := release(wave(1, 2, 0), wave(2, 2, 0))
	r.Spec.Security = true
	f := newFleet(1)
	f.tenants[0].Frozen = "quarter close"
	run(t, r, f, 3, 10*time.Second)
	if !Admitted(r, "xw1t00") || len(r.Status.Waves[0].Skipped) != 0 {
		t.Fatalf("security release did not reach the frozen tenant: %+v", r.Status.Waves[0])
	}
	r2 := release(wave(1, 2, 0), wave(2, 2, 0))
	r2.Spec.Security = true
	r2.Spec.Waves[1].Frozen = "platform change freeze"
	run(t, r2, newFleet(1), 4, 10*time.Second)
	if Admitted(r2, "xw2t00") || r2.Status.Phase != evav1.RolloutPaused {
		t.Fatalf("the platform's wave freeze did not hold the security release: %s: %s", r2.Status.Phase, r2.Status.Message)
	}
	plain := release(wave(1, 2, 0))
	g := newFleet(1)
	g.tenants[0].Frozen = "quarter close"
	run(t, plain, g, 2, 10*time.Second)
	if Admitted(plain, "xw1t00") {
		t.Fatal("a release that is not a security release reached a frozen tenant")
	}
}

// A tenant no running operator serves would never be rendered on the release: it is
// not admitted, says so in the wave's skipped, and once unserved after its admission is
// not judged.
func TestUnservedTenantIsNotAdmitted(t *testing.T) {
	r := release(wave(1, 2, 0), wave(2, 2, 0))
	f := newFleet(2)
	f.tenants[0].Unserved = `operator version "v9.9.9" has no running operator`
	run(t, r, f, 4, 10*time.Second)
	if Admitted(r, "xw1t00") || !Admitted(r, "xw2t01") {
		t.Fatalf("%+v", r.Status.Waves)
	}
	if s := r.Status.Waves[0].Skipped; len(s) != 1 || !strings.HasPrefix(s[0].Reason, "unserved: operator version") {
		t.Fatalf("skipped %+v", s)
	}
	later := release(wave(1, 2, 0), wave(2, 2, 0))
	g := newFleet(1)
	run(t, later, g, 1, 10*time.Second)
	g.tenants[0].Unserved = "no running operator"
	run(t, later, g, 3, 10*time.Second)
	if e := admissionOf(later, "xw1t00"); !strings.HasPrefix(e.Reason, "unserved since its admission") {
		t.Fatalf("admission %+v", e)
	}
	if later.Status.Phase == evav1.RolloutHalted {
		t.Fatalf("halted on an unserved tenant: %s", later.Status.Message)
	}
}

// A frozen tenant a security release admitted renders thawed, its releases no longer
// suspended, whatever it edits since (a new freeze reason included): the fix stays.
func TestSecurityReleaseThawsTheTenantItAdmitted(t *testing.T) {
	tn := &evav1.EvaTenant{Spec: evav1.EvaTenantSpec{CapsuleCode: "ACMECO", Frozen: "quarter close"}}
	tn.Name, tn.Generation, tn.UID = "acmeco", 4, "uid-1"
	sec := release(wave(1, 1, 0))
	sec.Spec.Security = true
	sec.Status.Waves = []evav1.WaveStatus{{Wave: 1, Updated: []evav1.RolloutTenant{{Name: "acmeco", Generation: 4, UID: "uid-1"}}}}
	if got := WithReleases(tn, []*evav1.EvaRollout{sec}, []string{"crm"}); got.Spec.Frozen != "" || got.Spec.Versions["crm"] != "1.5.0" {
		t.Fatalf("rendered %+v, want thawed on crm 1.5.0", got.Spec)
	}
	if tn.Spec.Frozen == "" {
		t.Fatal("WithReleases thawed the tenant it was given")
	}
	tn.Generation, tn.Spec.Frozen = 5, "audit, again" // frozen again to shed the fix
	if got := WithReleases(tn, []*evav1.EvaRollout{sec}, []string{"crm"}); got.Spec.Frozen != "" {
		t.Fatal("frozen again since the security release admitted it: suspended again")
	}
	plain := release(wave(1, 1, 0))
	plain.Status = sec.Status
	if got := WithReleases(tn, []*evav1.EvaRollout{plain}, []string{"crm"}); got.Spec.Frozen == "" {
		t.Fatal("a release that is not a security release thawed the tenant")
	}
	again := tn.DeepCopy()
	again.UID = "uid-2" // deleted and created again: another tenant
	if got := WithReleases(again, []*evav1.EvaRollout{sec}, []string{"crm"}); got.Spec.Frozen == "" {
		t.Fatal("a tenant created again under the name was thawed by its namesake's admission")
	}
	file := tn.DeepCopy()
	file.Generation = 0
	if g := GenerationOf(file); g == 0 || g != GenerationOf(file.DeepCopy()) {
		t.Fatalf("a tenant file's generation %d: want a stable non-zero number", g)
	}
	changed := file.DeepCopy()
	changed.Spec.Frozen = "again"
	if GenerationOf(changed) == GenerationOf(file) {
		t.Fatal("a tenant file's generation did not change with its spec")
	}
}

// A tenant the release changes nothing of (it pins every module the release names) is
// Ready on the release at once: that proves nothing, so a failing tenant beside it
// halts the rollout instead of being set aside.
func TestUnchangedTenantProvesNothing(t *testing.T) {
	r := release(wave(1, 2, 0), wave(2, 2, 0))
	r.Spec.Gates.ReadyTimeout = &metav1.Duration{Duration: time.Minute}
	f := newFleet(2)
	f.tenants[0].Unchanged = true
	f.failing["XW1T01"] = true
	run(t, r, f, 20, 10*time.Second)
	if r.Status.Phase != evav1.RolloutHalted || admissionOf(r, "xw1t01").SetAsideAt != nil || Admitted(r, "xw2t00") {
		t.Fatalf("%s: %s; waves %+v", r.Status.Phase, r.Status.Message, r.Status.Waves)
	}
}

// A requester's tenant alone in a later wave, edited after its admission, proves
// nothing of its own; the release was proven in an earlier wave, so the wave goes on
// instead of holding every later wave for good.
func TestEditedTenantDoesNotHoldALaterWave(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0), wave(3, 1, 0))
	f := newFleet(1)
	for i := range f.tenants {
		f.tenants[i].Generation = 1
	}
	run(t, r, f, 3, 10*time.Second) // wave 1 proven; XW2T00 admitted, not Ready yet
	if e := admissionOf(r, "xw2t00"); e.AdmittedAt == nil || e.ReadyAt != nil {
		t.Fatalf("%s: %s; %+v", r.Status.Phase, r.Status.Message, e)
	}
	f.tenants[1].Generation = 9 // its owner edits it: unjudged
	run(t, r, f, 4, 10*time.Second)
	if !Admitted(r, "xw3t00") || r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("wave 3 held by wave 2's edited tenant: %s: %s", r.Status.Phase, r.Status.Message)
	}
}

// The tenants of a wave passed over take the release as they recover, maxUpdate at a
// time and gated, not all at once.
func TestPassedOverWaveAdmitsItsRecoveredTenantsByMaxUpdate(t *testing.T) {
	r := release(wave(1, 1, 0), wave(2, 1, 0))
	f := newFleet(3)
	for i := range 3 {
		f.tenants[i].Ready = false // wave 1
	}
	run(t, r, f, 8, 10*time.Second)
	if !r.Status.Waves[0].PassedOver || r.Status.Phase != evav1.RolloutComplete {
		t.Fatalf("%s: %s", r.Status.Phase, r.Status.Message)
	}
	for i := range 3 {
		f.tenants[i].Ready = true
	}
	d := Plan(r, f.tenants, Delivery{}, "", t0.Add(time.Hour))
	if len(d.Admitted) != 1 {
		t.Fatalf("admitted %d of the recovered wave at once, want maxUpdate 1", len(d.Admitted))
	}
}
