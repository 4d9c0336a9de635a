package testenv

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestSchedulerRunsTheLongestFirst asks for turns in declaration order (as Go releases
// parallel tests) with two slots: the listed tests run first, in the list's order, then
// the others in the order they asked, never more than two at once.
func TestSchedulerRunsTheLongestFirst(t *testing.T) {
	s := NewScheduler(2, []string{"long1", "long2", "group/"}, 500*time.Millisecond)
	names := []string{"short1", "group/a", "short2", "long1", "short3", "long2"}
	var mu sync.Mutex
	var order []string
	running, most := 0, 0
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 20 * time.Millisecond) // ask in declaration order
			done := s.Wait(name)
			mu.Lock()
			order = append(order, name)
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			done()
			done()
		}()
	}
	wg.Wait()
	// Turns go by rank; the two slots let pairs start together, in either order.
	want := [][]string{{"long1", "long2"}, {"group/a", "short1"}, {"short2", "short3"}}
	for i, pair := range want {
		got := slices.Clone(order[2*i : 2*i+2])
		slices.Sort(got)
		if !slices.Equal(got, pair) {
			t.Fatalf("turns %s, want pairs %v", order, want)
		}
	}
	if most > 2 {
		t.Fatalf("%d ran at once with 2 slots", most)
	}
}
