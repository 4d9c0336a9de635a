// Package leaselock is a mutex shared by processes of one cluster, held as a
// coordination.k8s.io Lease: whoever creates the Lease holds the lock, and renews it
// while holding it; deleting it releases it, and a Lease not renewed within its
// duration (its holder died) may be taken over.
package leaselock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lock is one named lock.
type Lock struct {
	// Client writes the Lease; Reader reads it from the API server (not a cache).
	Client client.Client
	Reader client.Reader
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Holder identifies this process in the Lease.
	Holder string
	// Duration within which a held lock not renewed counts as abandoned (default 2
	// minutes). The holder renews it every quarter of it.
	Duration time.Duration
	// Log is told when a release fails: the Lease then stays until Duration passes, and
	// every other holder waits that long (the zero Logger discards).
	Log logr.Logger
	// Retry is how long a process waiting for the lock waits between tries (default
	// 100 to 200 ms, for locks held briefly; a lock held for a process's life wants
	// about a quarter of Duration).
	Retry time.Duration
}

// retry is the wait before the next try, jittered.
func (l *Lock) retry() time.Duration {
	if l.Retry <= 0 {
		return 100*time.Millisecond + rand.N(100*time.Millisecond)
	}
	return l.Retry + rand.N(l.Retry/2+1)
}

func (l *Lock) duration() time.Duration {
	if l.Duration <= 0 {
		return 2 * time.Minute
	}
	return l.Duration
}

// Acquire blocks until this process holds the lock or ctx ends. It returns a context
// that ends when ctx does or the lock is lost (not renewed within its duration, or
// taken over), which the work done while holding it runs under, and the release
// function.
func (l *Lock) Acquire(ctx context.Context) (context.Context, func(), error) {
	for {
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Holder), AcquireTime: &now, RenewTime: &now,
				LeaseDurationSeconds: ptr.To(int32(l.duration().Seconds()))},
		}
		err := l.Client.Create(ctx, lease)
		if err == nil {
			held, release := l.hold(ctx, lease)
			return held, release, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("taking lock %s/%s: %w", l.Namespace, l.Name, err)
		}
		var other coordinationv1.Lease
		switch err := l.Reader.Get(ctx, client.ObjectKeyFromObject(lease), &other); {
		case apierrors.IsNotFound(err):
			continue // released meanwhile
		case err != nil:
			return nil, nil, fmt.Errorf("reading lock %s/%s: %w", l.Namespace, l.Name, err)
		}
		if renewed := other.Spec.RenewTime; renewed != nil && time.Since(renewed.Time) > l.duration() {
			// Abandoned: remove exactly that Lease, then race for it again.
			// Its UID and version: a renewal since it was read keeps it its holder's.
			uid, version := other.UID, other.ResourceVersion
			if err := l.Client.Delete(ctx, &other, client.Preconditions{UID: &uid, ResourceVersion: &version}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, nil, fmt.Errorf("taking over abandoned lock %s/%s: %w", l.Namespace, l.Name, err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(l.retry()):
		}
	}
}

// errReleased ends a held context once its lock is released.
var errReleased = errors.New("lock released")

// hold renews lease, just created, every quarter of the lock's duration until it is
// released or lost (not renewed for three quarters of it, or taken), and returns the context the holder works under and the release.
func (l *Lock) hold(ctx context.Context, lease *coordinationv1.Lease) (context.Context, func()) {
	held, lose := context.WithCancelCause(ctx)
	uid := lease.UID // read before the renewals write lease
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		quarter := l.duration() / 4
		tick := time.NewTicker(quarter)
		defer tick.Stop()
		// Others time the lock from the renew time written; the holder gives it up three
		// quarters of the duration after the last one it wrote, before any of them may
		// take it over. Each renewal is bounded, so a hanging one cannot keep it.
		written := lease.Spec.RenewTime.Time
		for {
			select {
			case <-held.Done():
				return
			case <-tick.C:
			}
			at := time.Now()
			attempt, cancel := context.WithTimeout(held, quarter)
			ok, err := l.renew(attempt, lease, at)
			cancel()
			switch {
			case ok:
				written = at
			case err != nil && held.Err() == nil:
				lose(err)
				return
			case time.Since(written) >= 3*quarter:
				lose(fmt.Errorf("lock %s/%s not renewed for %s: others may take it", l.Namespace, l.Name, time.Since(written).Round(time.Millisecond)))
				return
			}
		}
	}()
	return held, func() {
		lose(errReleased)
		<-renewing
		// Only our own Lease: a process that took over an abandoned one keeps it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := l.Client.Delete(ctx, lease, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			l.Log.Error(err, "releasing the lock failed: others wait until it counts as abandoned",
				"lease", l.Namespace+"/"+l.Name, "after", l.duration())
		}
	}
}

// renew writes at as lease's renew time. It reports whether it did, and an error when
// the lock is lost: its Lease deleted or another holder's. A renewal that failed
// otherwise (the API server away) is tried again at the next tick.
func (l *Lock) renew(ctx context.Context, lease *coordinationv1.Lease, at time.Time) (bool, error) {
	now := metav1.NewMicroTime(at)
	lease.Spec.RenewTime = &now
	err := l.Client.Update(ctx, lease)
	if err == nil || !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return err == nil, nil
	}
	// A conflict may be our own renewal that the server made but whose answer was
	// lost: the Lease read back says whose it is.
	var current coordinationv1.Lease
	switch err := l.Reader.Get(ctx, client.ObjectKeyFromObject(lease), &current); {
	case apierrors.IsNotFound(err):
		return false, fmt.Errorf("lock %s/%s lost: its Lease was deleted", l.Namespace, l.Name)
	case err != nil:
		return false, nil
	case current.UID != lease.UID || ptr.Deref(current.Spec.HolderIdentity, "") != l.Holder:
		return false, fmt.Errorf("lock %s/%s lost: taken over by %s", l.Namespace, l.Name, ptr.Deref(current.Spec.HolderIdentity, "another holder"))
	}
	current.DeepCopyInto(lease)
	return false, nil
}
