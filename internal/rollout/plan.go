// Package rollout decides the progress of a platform release (EvaRollout): which
// tenants it reaches next, when a wave has baked, when a gate halts it, and which
// release a tenant renders. Its functions are pure: the controller reads the tenants
// and the releases, and writes what they decide.
package rollout

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/sla"
)

// Tenant is what a rollout needs to know of one live tenant of its namespace.
type Tenant struct {
	Code, Name string
	Tier       evav1.Tier
	Wave       int32
	// Frozen is the tenant's spec.frozen: why no release may reach it (but a security
	// release).
	Frozen string
	// Unserved says why no running operator serves the tenant ("" when one does): no
	// release may reach it, for nobody would render it.
	Unserved string
	// OnRelease: the tenant's status says it renders this rollout's versions.
	OnRelease bool
	// Generation is the tenant's metadata.generation (0 where there is none: files).
	Generation int64
	// UID is the EvaTenant's metadata.uid ("" for a tenant file): the tenant the
	// admissions name, not just its name.
	UID types.UID
	// Ready: the tenant is Active and Ready for its current generation.
	Ready bool
	// NotReadySince is when the tenant stopped being Ready (zero while it is).
	NotReadySince time.Time
	// OnOlderRelease: the tenant renders an older release that admitted it at its
	// current generation. Not Ready, it may be that release's doing, which this one may
	// fix: it is admitted. Any other tenant not Ready is passed over until it is.
	OnOlderRelease bool
	// Failed: the tenant's phase is Failed, since FailedAt (its Ready condition's last
	// transition); Message is that condition's message.
	Failed   bool
	FailedAt time.Time
	Message  string
	// QueueDepth is the most messages one of the tenant's streams holds, when measured
	// (QueueDepthKnown).
	QueueDepth      uint64
	QueueDepthKnown bool
	// Pending: the release admitted the tenant but has not reached its workloads yet. On
	// the pull-request path, admission is a commit that waits for review and for Flux;
	// the tenant is waited for and not timed until the release reaches it.
	Pending bool
	// FluxShard is the Flux shard that installs the tenant's releases ("": the main
	// controllers), and Releases how many Helm releases this release installs or
	// upgrades for it: what admitting it costs its shard (Delivery).
	FluxShard string
	Releases  int
	// Unchanged: the release changes nothing of the tenant (it pins every module the
	// release names, or its tier has none of them). Admitted, it is Ready on the release
	// at once, which proves nothing of the release.
	Unchanged bool
}

// Delivery is how fast the GitOps tool installs releases: a rollout admits no more
// tenants than their Flux shards install within the ready timeout, whatever maxUpdate
// allows, so that no tenant times out waiting in helm-controller's queue.
type Delivery struct {
	// ReleasesPerMinute is how many Helm releases one helm-controller (each Flux shard's,
	// and the main one) installs or upgrades per minute, sustained; zero: no limit.
	ReleasesPerMinute float64
}

// capacity is how many releases one shard installs within d (at least one).
func (d Delivery) capacity(within time.Duration) int {
	return max(int(d.ReleasesPerMinute*within.Minutes()), 1)
}

func (t Tenant) key() string { return t.Name }

// live returns the live tenant an admission names: the tenant of its name, unless that
// tenant has another UID (the admitted one was deleted, and this one is another).
func (p *planner) live(e evav1.RolloutTenant) (Tenant, bool) {
	t, ok := p.byKey[e.Name]
	if !ok || !sameTenant(e.UID, t.UID) {
		return Tenant{}, false
	}
	return t, true
}

// admittedBefore: one of the rollout's admissions names the tenant (sameTenant).
func (p *planner) admittedBefore(t Tenant) bool {
	return slices.ContainsFunc(p.ever[t.Name], func(uid types.UID) bool { return sameTenant(uid, t.UID) })
}

// readyOnRelease: the tenant renders the release and is Ready on it.
func (t Tenant) readyOnRelease() bool { return t.OnRelease && t.Ready }

// notAdmissible says why the release may not reach the tenant now ("" when it may).
// A tenant not Ready before the release (invalid, refused, failing on its own values),
// or already over the queue-depth gate, would fail any release and with it halt the
// rollout for every tenant of the namespace: it waits until it is Ready and drained.
func (p *planner) notAdmissible(t Tenant) string {
	switch {
	case t.Unserved != "":
		return "unserved: " + safetext.Limit(safetext.Escape(t.Unserved), 200)
	case p.frozen(t):
		return "frozen: " + safetext.Escape(t.Frozen)
	case !t.Ready && !t.OnOlderRelease:
		return "not Ready before the release: " + safetext.Limit(safetext.Escape(t.Message), 200)
	case p.overQueueDepth(t):
		return fmt.Sprintf("queue depth %d above %d before the release", t.QueueDepth, *p.r.Spec.Gates.MaxQueueDepth)
	}
	return ""
}

// overQueueDepth: the gate has a limit and the tenant's measured backlog is over it.
func (p *planner) overQueueDepth(t Tenant) bool {
	limit := p.r.Spec.Gates.MaxQueueDepth
	return limit != nil && t.QueueDepthKnown && t.QueueDepth > uint64(max(*limit, 0))
}

// frozen: the tenant froze itself and the release is not a security release, which
// passes a tenant's own freeze.
func (p *planner) frozen(t Tenant) bool { return t.Frozen != "" && !p.r.Spec.Security }

// unjudged says why the gates do not judge an admitted tenant ("" when they do): its
// owner froze it or changed its spec since the admission, so what it does now is not
// the release's doing, or no running operator serves it any more.
func (p *planner) unjudged(e evav1.RolloutTenant, t Tenant) string {
	switch {
	case t.Unserved != "":
		return "unserved since its admission: " + safetext.Limit(safetext.Escape(t.Unserved), 200)
	case p.frozen(t):
		return "frozen since its admission"
	case e.Generation != 0 && t.Generation != 0 && e.Generation != t.Generation:
		return fmt.Sprintf("its spec changed since its admission (generation %d, then %d)", e.Generation, t.Generation)
	}
	return ""
}

// waitedFor: the wave waits for the admitted tenant to be Ready on the release, or,
// failing a gate, to recover or be set aside (graceNotes).
func (p *planner) waitedFor(e evav1.RolloutTenant) bool {
	t, live := p.live(e)
	return live && e.SetAsideAt == nil && p.unjudged(e, t) == "" && (!t.readyOnRelease() || p.graceNotes[e.Name] != "")
}

// Event is something a decision wants recorded on the rollout.
type Event struct{ Type, Reason, Message string }

// Decision is the rollout's next status and what to record.
type Decision struct {
	Status evav1.EvaRolloutStatus
	// Admitted are the tenants given the release by this decision.
	Admitted []Tenant
	Events   []Event
	// RequeueAfter is when to look again without any tenant changing (a bake ending, a
	// readiness deadline passing); zero when nothing is pending.
	RequeueAfter time.Duration
}

// Progress is how often a rollout that waits on tenants looks again without events.
const Progress = 10 * time.Second

// Plan decides the next status of a rollout from its tenants (every live tenant, frozen
// ones included). supersededBy names a newer rollout, which stops this one. A wave
// starts only when every wave before it was updated and baked; inside a wave at most
// maxUpdate tenants are updating (admitted, not Ready on the release) at once; a tenant
// Failed on the release, or not Ready on it within the gate's timeout, halts the rollout.
// Admissions also wait for the tenants' Flux shards (Delivery): a tenant is admitted only
// when the releases in flight on its shard, its own included, are installed within its
// ready timeout at the shard's rate, or when nothing is in flight there.
func Plan(r *evav1.EvaRollout, tenants []Tenant, delivery Delivery, supersededBy string, now time.Time) Decision {
	p := &planner{r: r, delivery: delivery, now: metav1.NewTime(now), st: *r.Status.DeepCopy(), graceNotes: map[string]string{}}
	p.st.ObservedGeneration = r.Generation
	p.group(tenants)
	p.run(supersededBy)
	p.count()
	p.conditions()
	if p.st.Phase != r.Status.Phase {
		p.phaseEvent(r.Status.Phase)
	}
	return Decision{Status: p.st, Admitted: p.admitted, Events: p.events, RequeueAfter: p.requeue}
}

type planner struct {
	r        *evav1.EvaRollout
	delivery Delivery
	now      metav1.Time
	st       evav1.EvaRolloutStatus
	byWave   map[int32][]Tenant
	byKey    map[string]Tenant
	// ever holds the UIDs of the tenants any wave of the rollout admitted, by name: a
	// tenant whose spec.wave changed after its admission is not admitted again; a tenant
	// created again under an admitted name is.
	ever     map[string][]types.UID
	admitted []Tenant
	events   []Event
	requeue  time.Duration
	// held says why an admission maxUpdate allowed waits for its Flux shard ("" when
	// none did).
	held string
	// graceNotes say, by tenant name, which gate an admitted tenant fails and when it
	// is set aside unless it recovers.
	graceNotes map[string]string
}

// group sorts the tenants by wave and code, and lines the status' waves up with the
// spec's.
func (p *planner) group(tenants []Tenant) {
	p.byWave, p.byKey = map[int32][]Tenant{}, map[string]Tenant{}
	for _, t := range tenants {
		p.byWave[t.Wave] = append(p.byWave[t.Wave], t)
		p.byKey[t.key()] = t
	}
	for _, ts := range p.byWave {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Code < ts[j].Code })
	}
	previous := map[int32]evav1.WaveStatus{}
	p.ever = map[string][]types.UID{}
	for _, ws := range p.st.Waves {
		previous[ws.Wave] = ws
		for _, e := range ws.Updated {
			p.ever[e.Name] = append(p.ever[e.Name], e.UID)
		}
	}
	p.st.Waves = make([]evav1.WaveStatus, len(p.r.Spec.Waves))
	for i, w := range p.r.Spec.Waves {
		ws, ok := previous[w.Wave]
		if !ok {
			ws = evav1.WaveStatus{Wave: w.Wave}
		}
		ws.Total = int32(len(p.byWave[w.Wave]))
		p.st.Waves[i] = ws
	}
}

func (p *planner) run(supersededBy string) {
	if supersededBy != "" {
		p.st.Phase, p.st.CurrentWave = evav1.RolloutSuperseded, 0
		p.st.Message = "superseded by EvaRollout " + supersededBy + ": it admits no tenant any more"
		return
	}
	for i, w := range p.r.Spec.Waves {
		ws := &p.st.Waves[i]
		p.refreshSkipped(ws)
		if ws.CompletedAt != nil && !p.reopens(i) {
			if ws.PassedOver {
				// Its tenants take the release as they recover, once it was proven
				// elsewhere, as the wave would have given it: maxUpdate at a time, gated.
				if failing := p.gates(ws); len(failing) > 0 {
					p.halt(w, failing)
					return
				}
				if p.proven() && !p.r.Spec.Paused && w.Frozen == "" {
					p.admit(ws, maxUpdate(w, p.eligible(w.Wave)))
				}
				continue
			}
			// A tenant that joins a finished wave is given the release at once: the
			// wave proved it.
			p.admit(ws, len(p.byWave[w.Wave]))
			continue
		}
		p.st.CurrentWave = w.Wave
		if w.Frozen != "" {
			p.st.Phase = evav1.RolloutPaused
			p.st.Message = fmt.Sprintf("wave %d is frozen: %s", w.Wave, w.Frozen)
			return
		}
		if failing := p.gates(ws); len(failing) > 0 {
			p.halt(w, failing)
			return
		}
		if p.r.Spec.Paused {
			p.st.Phase, p.st.Message = evav1.RolloutPaused, fmt.Sprintf("paused in wave %d (spec.paused)", w.Wave)
			return
		}
		p.admit(ws, maxUpdate(w, p.eligible(w.Wave)))
		if !p.waveDone(w, ws) {
			return
		}
	}
	if !p.proven() && p.inWaves() > 0 {
		// Every wave passed over: the release reached nobody, so nothing proved it.
		p.st.Phase, p.st.CurrentWave = evav1.RolloutProgressing, 0
		p.st.Message = "every wave passed over: no tenant may take the release yet (see each wave's skipped)"
		p.wake(Progress)
		return
	}
	p.st.Phase, p.st.CurrentWave = evav1.RolloutComplete, 0
	p.st.Message = "every wave is updated and baked"
}

// admit gives the release to the next tenants of the wave, in code order, while fewer
// than limit are updating and their Flux shards have room (shardHolds).
func (p *planner) admit(ws *evav1.WaveStatus, limit int) {
	updating := 0
	for _, e := range ws.Updated {
		if p.waitedFor(e) {
			updating++
		}
	}
	inFlight := p.inFlight()
	for _, t := range p.byWave[ws.Wave] {
		if p.admittedBefore(t) || p.notAdmissible(t) != "" || updating >= limit {
			continue
		}
		if reason := p.shardHolds(t, inFlight[t.FluxShard]); reason != "" {
			if p.held == "" {
				p.held = reason
			}
			continue
		}
		inFlight[t.FluxShard] += t.Releases
		p.ever[t.Name] = append(p.ever[t.Name], t.UID)
		ws.Updated = append(ws.Updated, evav1.RolloutTenant{Code: t.Code, Name: t.Name,
			AdmittedAt: p.now.DeepCopy(), Generation: t.Generation, UID: t.UID, AdmittedQueueDepth: depthAtAdmission(t)})
		p.admitted = append(p.admitted, t)
		p.events = append(p.events, Event{"Normal", "TenantUpdating",
			fmt.Sprintf("wave %d: tenant %s gets the release", ws.Wave, t.Code)})
		updating++
	}
}

// inFlight counts, per Flux shard, the releases of the tenants admitted and not yet
// Ready on the release, every wave together.
func (p *planner) inFlight() map[string]int {
	out := map[string]int{}
	for _, ws := range p.st.Waves {
		for _, e := range ws.Updated {
			if p.waitedFor(e) {
				t, _ := p.live(e)
				out[t.FluxShard] += t.Releases
			}
		}
	}
	return out
}

// shardHolds says why the tenant waits for its Flux shard ("" when it may be admitted):
// with inFlight releases queued there, its own would not all be installed within its
// ready timeout at the shard's rate. A shard with nothing in flight takes any tenant.
func (p *planner) shardHolds(t Tenant, inFlight int) string {
	if p.delivery.ReleasesPerMinute <= 0 || inFlight == 0 {
		return ""
	}
	timeout := p.readyTimeout(t.Tier)
	capacity := p.delivery.capacity(timeout)
	if inFlight+t.Releases <= capacity {
		return ""
	}
	controller := "the main helm-controller"
	if t.FluxShard != "" {
		controller = "Flux shard " + t.FluxShard + "'s helm-controller"
	}
	return fmt.Sprintf("%d release(s) in flight on %s, which installs %g a minute (%d within readyTimeout %s); %s (%d more) waits",
		inFlight, controller, p.delivery.ReleasesPerMinute, capacity, timeout, t.Code, t.Releases)
}

// waveDone reports whether the wave is updated and baked, or passed over; when it is
// not, it sets the phase and message saying what the wave waits for.
func (p *planner) waveDone(w evav1.RolloutWave, ws *evav1.WaveStatus) bool {
	var waiting []string
	admitted := 0
	for _, e := range ws.Updated {
		if _, live := p.live(e); live {
			admitted++
		}
		if p.waitedFor(e) {
			code := e.Code
			if t, _ := p.live(e); t.Pending {
				code += " (the admitting change not applied yet)"
			}
			if note := p.graceNotes[e.Name]; note != "" {
				code += " (failing: " + note + ")"
			}
			waiting = append(waiting, code)
		}
	}
	pending := p.pendingIn(w.Wave)
	switch {
	case admitted == 0 && pending == 0:
		// Nobody the release may reach: waiting on the wave would hold every later
		// wave for tenants that cannot take it (they are admitted as they recover,
		// once the release is proven).
		ws.BakeStartedAt, ws.PassedOver, ws.CompletedAt = nil, true, p.now.DeepCopy()
		p.events = append(p.events, Event{"Normal", "WavePassedOver",
			fmt.Sprintf("wave %d: no tenant may take the release (%d skipped): passed over", w.Wave, len(ws.Skipped))})
		return true
	case pending > 0 || len(waiting) > 0:
		ws.BakeStartedAt = nil // a tenant that stops being Ready restarts the bake
		p.st.Phase = evav1.RolloutProgressing
		p.st.Message = fmt.Sprintf("wave %d: %d of %d tenants updated; waiting for %s to be Ready on the release",
			w.Wave, len(ws.Updated)-len(waiting), ws.Total-int32(len(ws.Skipped)), orNone(waiting))
		if p.held != "" {
			p.st.Message += "; admissions capped: " + p.held
		}
		p.wake(Progress)
		return false
	case !p.judgedReady([]evav1.WaveStatus{*ws}, "") && !p.proven():
		// Every admitted tenant unjudged (changed, frozen, unserved since) or set
		// aside, and no earlier wave proved the release either: it holds until
		// another tenant of it may take the release. A wave after a proof does not:
		// its owners' edits would otherwise hold the release for every later wave.
		ws.BakeStartedAt = nil
		p.st.Phase = evav1.RolloutProgressing
		p.st.Message = fmt.Sprintf("wave %d: no admitted tenant was judged Ready on the release (%s); waiting for another tenant of the wave to take it",
			w.Wave, p.unprovenReasons(ws))
		p.wake(Progress)
		return false
	}
	if ws.BakeStartedAt == nil {
		ws.BakeStartedAt = p.now.DeepCopy()
	}
	if left := w.BakeTime.Duration - p.now.Sub(ws.BakeStartedAt.Time); left > 0 {
		p.st.Phase = evav1.RolloutBaking
		// The end, not the time left: a message that changed every reconcile would write
		// the status, and wake every rollout of the namespace, for the whole bake.
		p.st.Message = fmt.Sprintf("wave %d baking until %s", w.Wave, ws.BakeStartedAt.Add(w.BakeTime.Duration).UTC().Format(time.RFC3339))
		p.wake(left)
		return false
	}
	ws.CompletedAt = p.now.DeepCopy()
	p.events = append(p.events, Event{"Normal", "WaveComplete",
		fmt.Sprintf("wave %d: %d tenant(s) updated and baked", w.Wave, len(ws.Updated))})
	return true
}

// unprovenReasons says, tenant by tenant, why no admission of the wave proves the
// release.
func (p *planner) unprovenReasons(ws *evav1.WaveStatus) string {
	var out []string
	for _, e := range ws.Updated {
		if _, live := p.live(e); live && e.Reason != "" {
			out = append(out, e.Code+": "+e.Reason)
		}
	}
	return safetext.Limit(orNone(out), 600)
}

// inWaves counts the tenants of the rollout's waves.
func (p *planner) inWaves() int {
	n := 0
	for _, w := range p.r.Spec.Waves {
		n += len(p.byWave[w.Wave])
	}
	return n
}

// refreshSkipped lists the wave's tenants the release has not reached and may not
// reach now: frozen, or not Ready before it.
func (p *planner) refreshSkipped(ws *evav1.WaveStatus) {
	ws.Skipped = nil
	for _, t := range p.byWave[ws.Wave] {
		if p.admittedBefore(t) {
			continue
		}
		if reason := p.notAdmissible(t); reason != "" {
			ws.Skipped = append(ws.Skipped, evav1.RolloutTenant{Code: t.Code, Name: t.Name, Reason: reason})
		}
	}
}

// eligible counts the tenants of a wave the release may reach.
func (p *planner) eligible(wave int32) int {
	n := 0
	for _, t := range p.byWave[wave] {
		if !p.frozen(t) && t.Unserved == "" {
			n++
		}
	}
	return n
}

func (p *planner) readyTimeout(tier evav1.Tier) time.Duration {
	if g := p.r.Spec.Gates.ReadyTimeout; g != nil {
		return g.Duration
	}
	if b, ok := sla.Budgets[tier]; ok {
		return b
	}
	return 15 * time.Minute
}

func (p *planner) wake(after time.Duration) {
	if p.requeue == 0 || after < p.requeue {
		p.requeue = after
	}
}

func (p *planner) count() {
	p.st.Updated, p.st.Total = 0, 0
	for _, ws := range p.st.Waves {
		p.st.Total += ws.Total
		for _, e := range ws.Updated {
			if _, live := p.live(e); live {
				p.st.Updated++
			}
		}
	}
}

func (p *planner) conditions() {
	set := func(ct string, ok bool, reason string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		apimeta.SetStatusCondition(&p.st.Conditions, metav1.Condition{Type: ct, Status: s, Reason: reason,
			Message: p.st.Message, ObservedGeneration: p.r.Generation, LastTransitionTime: p.now})
	}
	phase := string(p.st.Phase)
	set(evav1.ConditionReady, p.st.Phase == evav1.RolloutComplete, phase)
	set(evav1.ConditionStalled, p.st.Phase == evav1.RolloutHalted, phase)
	set(evav1.ConditionReconciling, p.st.Phase == evav1.RolloutProgressing || p.st.Phase == evav1.RolloutBaking, phase)
}

func (p *planner) phaseEvent(before evav1.RolloutPhase) {
	switch p.st.Phase {
	case evav1.RolloutHalted:
		p.events = append(p.events, Event{"Warning", "RolloutHalted", p.st.Message})
	case evav1.RolloutComplete:
		p.events = append(p.events, Event{"Normal", "RolloutComplete", p.st.Message})
	case evav1.RolloutSuperseded, evav1.RolloutPaused:
		p.events = append(p.events, Event{"Normal", "Rollout" + string(p.st.Phase), p.st.Message})
	default:
		if before == evav1.RolloutHalted || before == evav1.RolloutPaused {
			p.events = append(p.events, Event{"Normal", "RolloutResumed", p.st.Message})
		}
	}
}

// maxUpdate resolves a wave's maxUpdate against its eligible tenants: a count, or a
// percentage rounded up; at least 1; unset is all of them.
func maxUpdate(w evav1.RolloutWave, eligible int) int {
	if w.MaxUpdate == nil {
		return max(eligible, 1)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(w.MaxUpdate, eligible, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

func orNone(codes []string) string {
	if len(codes) == 0 {
		return "none"
	}
	return strings.Join(codes, ", ")
}
