package publish

import (
	"context"
	"errors"
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
	pending    map[string]submitted
}

// submitted is one tenant folder's place in a batch: its files, whether it may adopt a
// folder published before owners were recorded, and who waits for it.
type submitted struct {
	files   []render.File
	adopt   bool
	waiters []func(revision string, err error)
}

// Publish submits one tenant's files (nil removes the tenant) and waits for the batch
// holding them to be published; it returns the published revision.
func (b *Batcher) Publish(ctx context.Context, dir string, files []render.File) (string, error) {
	type result struct {
		revision string
		err      error
	}
	ch := make(chan result, 1)
	b.Submit(dir, files, false, func(revision string, err error) { ch <- result{revision, err} })
	select {
	case r := <-ch:
		return r.revision, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Submit queues one tenant's files (nil removes the tenant) for the next batch and
// returns at once: a reconcile does not wait for the window, so a batch gathers every
// tenant that changed meanwhile, however few reconciles run at once. adopt says the
// folder may be taken if it was published before owners were recorded (Update.Adopt).
// done is called once the batch holding them was published (with its revision) or
// failed; it runs on the publishing goroutine and must not block.
func (b *Batcher) Submit(dir string, files []render.File, adopt bool, done func(revision string, err error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[string]submitted{}
		window := b.Window
		if window <= 0 {
			window = 500 * time.Millisecond
		}
		time.AfterFunc(window, b.flush)
	}
	s := b.pending[dir]
	s.files, s.adopt, s.waiters = files, adopt, append(s.waiters, done)
	b.pending[dir] = s
}

func (b *Batcher) flush() {
	b.publishing.Lock()
	defer b.publishing.Unlock()
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := b.publish(ctx, pending)
	took := time.Since(start)
	revision := ""
	if err == nil {
		revision = res.Revision
	}
	// The submitters first; then whatever OnPublish does (metrics, asking Flux to fetch)
	// delays only the next batch.
	for _, s := range pending {
		for _, done := range s.waiters {
			done(revision, err)
		}
	}
	if b.OnPublish != nil {
		b.OnPublish(took, res, err)
	}
}

// publish publishes the batch. Folders refused to their submitter (another owner's) are
// answered with the refusal and taken out of the batch, which is published without them:
// one tenant's refusal never holds back the others (pending keeps the rest).
func (b *Batcher) publish(ctx context.Context, pending map[string]submitted) (*Result, error) {
	for {
		u := Update{Tenants: map[string][]render.File{}, Adopt: map[string]bool{}, DeliveryDir: b.DeliveryDir}
		for dir, s := range pending {
			u.Tenants[dir], u.Adopt[dir] = s.files, s.adopt
		}
		res, err := b.Sink.Publish(ctx, u, b.Safety)
		var refusal *OwnerRefusal
		if !errors.As(err, &refusal) || len(refusal.Reasons) == 0 {
			return res, err
		}
		for dir, reason := range refusal.Reasons {
			own := &OwnerRefusal{Reasons: map[string]string{dir: reason}}
			for _, done := range pending[dir].waiters {
				done("", own)
			}
			delete(pending, dir)
		}
		if len(pending) == 0 {
			return nil, ErrOtherOwner
		}
	}
}
