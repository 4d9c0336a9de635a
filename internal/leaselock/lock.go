// Package leaselock is a mutex shared by processes of one cluster, held as a
// coordination.k8s.io Lease: whoever creates the Lease holds the lock, deleting it
// releases it, and a Lease not renewed within its duration (its holder died) may be
// taken over.
package leaselock

import (
	"context"
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
	// Duration after which a held lock counts as abandoned (default 2 minutes): longer
	// than anything done while holding it.
	Duration time.Duration
	// Log is told when a release fails: the Lease then stays until Duration passes, and
	// every other holder waits that long (the zero Logger discards).
	Log logr.Logger
}

func (l *Lock) duration() time.Duration {
	if l.Duration <= 0 {
		return 2 * time.Minute
	}
	return l.Duration
}

// Acquire blocks until this process holds the lock or ctx ends. It returns a release
// function.
func (l *Lock) Acquire(ctx context.Context) (release func(), err error) {
	for {
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Holder), AcquireTime: &now, RenewTime: &now,
				LeaseDurationSeconds: ptr.To(int32(l.duration().Seconds()))},
		}
		err := l.Client.Create(ctx, lease)
		if err == nil {
			uid := lease.UID
			return func() {
				// Only our own Lease: a process that took over an abandoned one keeps it.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := l.Client.Delete(ctx, lease, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					l.Log.Error(err, "releasing the lock failed: others wait until it counts as abandoned",
						"lease", l.Namespace+"/"+l.Name, "after", l.duration())
				}
			}, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("taking lock %s/%s: %w", l.Namespace, l.Name, err)
		}
		var held coordinationv1.Lease
		switch err := l.Reader.Get(ctx, client.ObjectKeyFromObject(lease), &held); {
		case apierrors.IsNotFound(err):
			continue // released meanwhile
		case err != nil:
			return nil, fmt.Errorf("reading lock %s/%s: %w", l.Namespace, l.Name, err)
		}
		if renewed := held.Spec.RenewTime; renewed != nil && time.Since(renewed.Time) > l.duration() {
			// Abandoned: remove exactly that Lease, then race for it again.
			uid := held.UID
			if err := l.Client.Delete(ctx, &held, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("taking over abandoned lock %s/%s: %w", l.Namespace, l.Name, err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100*time.Millisecond + rand.N(100*time.Millisecond)):
		}
	}
}
