package rollout

import (
	"fmt"
	"strings"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/safetext"
)

// halt stops the rollout in wave w on the failing gates.
func (p *planner) halt(w evav1.RolloutWave, failing []string) {
	p.st.Phase, p.st.CurrentWave = evav1.RolloutHalted, w.Wave
	// Bounded: an event's note is refused past 1024 bytes.
	p.st.Message = safetext.Limit(fmt.Sprintf("halted in wave %d: %s", w.Wave, strings.Join(failing, "; ")), 900)
	p.requeue = Progress
}

// reopens reports whether the wave at index i, passed over, is taken up again (and
// does so): a tenant of it may take the release now, nothing proved the release yet,
// and no later wave admitted anyone. Otherwise a fleet whose every wave was passed
// over would never admit a tenant that recovers.
func (p *planner) reopens(i int) bool {
	ws := &p.st.Waves[i]
	if !ws.PassedOver || p.proven() || p.pendingIn(ws.Wave) == 0 {
		return false
	}
	for _, later := range p.st.Waves[i+1:] {
		for _, e := range later.Updated {
			if _, live := p.live(e); live {
				return false
			}
		}
	}
	ws.CompletedAt, ws.PassedOver = nil, false
	return true
}

// pendingIn counts the tenants of a wave the release may reach now and has not.
func (p *planner) pendingIn(wave int32) int {
	n := 0
	for _, t := range p.byWave[wave] {
		if !p.admittedBefore(t) && p.notAdmissible(t) == "" {
			n++
		}
	}
	return n
}

// proven: the release was judged Ready on one of the tenants it admitted.
func (p *planner) proven() bool {
	return p.judgedReady(p.st.Waves, "")
}
