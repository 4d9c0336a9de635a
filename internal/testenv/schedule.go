package testenv

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Scheduler gives parallel tests their turns: a fixed number at once and, whenever a
// turn frees, the waiting test ranked first (by a list of names, longest-running
// first, then in the order they asked). Go's own -parallel starts tests in the order
// they were declared, file by file, so a long test declared last runs the suite's last
// minutes alone.
type Scheduler struct {
	mu      sync.Mutex
	turn    *sync.Cond
	slots   int
	first   []string
	settle  time.Duration
	opensAt time.Time
	asked   int
	waiting map[string]waiter
}

type waiter struct{ rank, asked int }

// NewScheduler runs at most slots tests at once, those named in first before the
// others and in that order (a name ending in a slash stands for every subtest of that
// test). No turn is given until settle has passed since the first
// test asked: Go releases every parallel test at the same moment, and the order is
// decided once all have asked.
func NewScheduler(slots int, first []string, settle time.Duration) *Scheduler {
	s := &Scheduler{slots: max(slots, 1), first: first, settle: settle, waiting: map[string]waiter{}}
	s.turn = sync.NewCond(&s.mu)
	return s
}

// Wait blocks until it is the named test's turn and returns the function that ends it
// (safe to call more than once). A nil Scheduler gives every test its turn at once.
func (s *Scheduler) Wait(name string) (done func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opensAt.IsZero() {
		s.opensAt = time.Now().Add(s.settle)
		time.AfterFunc(s.settle, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.turn.Broadcast()
		})
	}
	rank := slices.IndexFunc(s.first, func(first string) bool {
		return first == name || (strings.HasSuffix(first, "/") && strings.HasPrefix(name, first))
	})
	if rank < 0 {
		rank = len(s.first)
	}
	s.asked++
	s.waiting[name] = waiter{rank: rank, asked: s.asked}
	for time.Now().Before(s.opensAt) || s.slots == 0 || !s.ahead(name) {
		s.turn.Wait()
	}
	delete(s.waiting, name)
	s.slots--
	if s.slots > 0 {
		// The next in line may have looked before this one left the queue.
		s.turn.Broadcast()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.slots++
			s.turn.Broadcast()
		})
	}
}

// ahead reports whether no waiting test ranks before the named one.
func (s *Scheduler) ahead(name string) bool {
	me := s.waiting[name]
	for other, w := range s.waiting {
		if other != name && (w.rank < me.rank || (w.rank == me.rank && w.asked < me.asked)) {
			return false
		}
	}
	return true
}
