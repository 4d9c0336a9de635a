package publish

import (
	"context"
	"sync"
	"time"

	"github.com/aidonow/eva/internal/render"
)

// Batcher gathers tenant updates submitted concurrently (by reconciles of many tenants)
// into one publish per window: many tenants changing together make few commits, not
// one commit per tenant per reconcile.
type Batcher struct {
	Sink   Sink
	Safety Safety
	// Window is how long the first update of a batch waits for others (default 500 ms).
	Window time.Duration
	// OnPublish, when set, is told each publish's duration and result.
	OnPublish func(d time.Duration, res *Result, err error)

	// publishing is held for each publish: publishes never overlap (a sink's local
	// cache is one go-git repository), and what arrives meanwhile joins the next batch.
	publishing sync.Mutex
	mu         sync.Mutex
	pending    map[string][]render.File
	waiters    []chan batchResult
}

type batchResult struct {
	revision string
	err      error
}

// Publish submits one tenant's files (nil removes the tenant) and waits for the batch
// holding them to be published; it returns the published revision.
func (b *Batcher) Publish(ctx context.Context, dir string, files []render.File) (string, error) {
	ch := make(chan batchResult, 1)
	b.mu.Lock()
	if b.pending == nil {
		b.pending = map[string][]render.File{}
		window := b.Window
		if window <= 0 {
			window = 500 * time.Millisecond
		}
		time.AfterFunc(window, b.flush)
	}
	b.pending[dir] = files
	b.waiters = append(b.waiters, ch)
	b.mu.Unlock()
	select {
	case r := <-ch:
		return r.revision, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (b *Batcher) flush() {
	b.publishing.Lock()
	defer b.publishing.Unlock()
	b.mu.Lock()
	pending, waiters := b.pending, b.waiters
	b.pending, b.waiters = nil, nil
	b.mu.Unlock()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := b.Sink.Publish(ctx, Update{Tenants: pending}, b.Safety)
	took := time.Since(start)
	r := batchResult{err: err}
	if err == nil {
		r.revision = res.Revision
	}
	// The waiting reconciles first; then whatever OnPublish does (metrics, asking Flux
	// to fetch) delays only the next batch.
	for _, ch := range waiters {
		ch <- r
	}
	if b.OnPublish != nil {
		b.OnPublish(took, res, err)
	}
}
