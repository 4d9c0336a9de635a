package publish

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/render"
)

// slowSink records how many publishes run at once; each takes longer than the batch
// window, as a push to a remote does.
type slowSink struct {
	running, most, calls atomic.Int32
	tenants              atomic.Int32
}

func (s *slowSink) Publish(_ context.Context, u Update, _ Safety) (*Result, error) {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	s.calls.Add(1)
	s.tenants.Add(int32(len(u.Tenants)))
	time.Sleep(80 * time.Millisecond)
	return &Result{Revision: fmt.Sprintf("rev-%d", s.calls.Load()), Committed: true}, nil
}

// TestBatcherPublishesNeverOverlap: tenants keep arriving while a publish is under way;
// the next batch waits for it (a sink's cache is one repository) and takes everything
// that arrived meanwhile.
func TestBatcherPublishesNeverOverlap(t *testing.T) {
	sink := &slowSink{}
	b := &Batcher{Sink: sink, Window: 10 * time.Millisecond}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			if _, err := b.Publish(context.Background(), fmt.Sprintf("tenant%02d", i), []render.File{{Path: "x", Data: []byte("y")}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most := sink.most.Load(); most != 1 {
		t.Errorf("%d publishes ran at once, want 1", most)
	}
	if got := sink.tenants.Load(); got != 30 {
		t.Errorf("%d tenants published, want 30", got)
	}
	if calls := sink.calls.Load(); calls >= 30 {
		t.Errorf("%d publishes for 30 tenants: nothing was batched", calls)
	}
	t.Logf("30 tenants over 300 ms in %d publishes", sink.calls.Load())
}
