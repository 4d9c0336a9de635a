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
	// DeliveryDir is the folder of the tenants' delivery files (Update.DeliveryDir).
	DeliveryDir string
	// OnPublish, when set, is told each publish's duration and result.
	OnPublish func(d time.Duration, res *Result, err error)

	// publishing is held for each publish: publishes never overlap (a sink's local
	// cache is one go-git repository), and what arrives meanwhile joins the next batch.
	publishing sync.Mutex
	mu         sync.Mutex
	pending    map[string][]render.File
	waiters    []func(revision string, err error)
}

// Publish submits one tenant's files (nil removes the tenant) and waits for the batch
// holding them to be published; it returns the published revision.
func (b *Batcher) Publish(ctx context.Context, dir string, files []render.File) (string, error) {
	type result struct {
		revision string
		err      error
	}
	ch := make(chan result, 1)
	b.Submit(dir, files, func(revision string, err error) { ch <- result{revision, err} })
	select {
	case r := <-ch:
		return r.revision, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Submit queues one tenant's files (nil removes the tenant) for the next batch and
// returns at once: a reconcile does not wait for the window, so a batch gathers every
// tenant that changed meanwhile, however few reconciles run at once. done is called once
// the batch holding them was published (with its revision) or failed; it runs on the
// publishing goroutine and must not block.
func (b *Batcher) Submit(dir string, files []render.File, done func(revision string, err error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[string][]render.File{}
		window := b.Window
		if window <= 0 {
			window = 500 * time.Millisecond
		}
		time.AfterFunc(window, b.flush)
	}
	b.pending[dir] = files
	b.waiters = append(b.waiters, done)
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
	res, err := b.Sink.Publish(ctx, Update{Tenants: pending, DeliveryDir: b.DeliveryDir}, b.Safety)
	took := time.Since(start)
	revision := ""
	if err == nil {
		revision = res.Revision
	}
	// The submitters first; then whatever OnPublish does (metrics, asking Flux to fetch)
	// delays only the next batch.
	for _, done := range waiters {
		done(revision, err)
	}
	if b.OnPublish != nil {
		b.OnPublish(took, res, err)
	}
}
