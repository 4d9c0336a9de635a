package controller

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/aidonow/eva/internal/leaselock"
)

// PlacerLeaseName is the Lease that makes one placer act at a time across every fleet
// operator of an environment, whatever its version: blue/green versions each elect a
// leader of their own, and two placers acting at once would book one cell's last room
// twice.
const PlacerLeaseName = "eva-placer"

// PlacerLease holds the placer's Lease for as long as this process's leader runs, taking
// it again when it is lost. The placer acts only while it is held.
type PlacerLease struct {
	Lock *leaselock.Lock

	mu   sync.Mutex
	held context.Context
}

// NeedLeaderElection: only the elected leader of this version contends.
func (l *PlacerLease) NeedLeaderElection() bool { return true }

// Start contends for the Lease until ctx ends.
func (l *PlacerLease) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("placer-lease")
	for ctx.Err() == nil {
		held, release, err := l.Lock.Acquire(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Error(err, "taking the placer's Lease; trying again")
				time.Sleep(time.Second)
			}
			continue
		}
		log.Info("holding the placer's Lease: this operator places the fleet's tenants")
		l.mu.Lock()
		l.held = held
		l.mu.Unlock()
		<-held.Done()
		release()
		if ctx.Err() == nil {
			log.Info("lost the placer's Lease", "reason", context.Cause(held))
		}
	}
	return nil
}

// Held is the context the placer acts under, nil while another process holds the
// Lease.
func (l *PlacerLease) Held() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil || l.held.Err() != nil {
		return nil
	}
	return l.held
}
