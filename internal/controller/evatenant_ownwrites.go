package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// CacheLagWait bounds how long a reconcile waits for the cache to show the status this
// process wrote before it acts on what the cache shows (someone else may have reset
// the status meanwhile).
const CacheLagWait = 30 * time.Second

// ownWrites remembers, per tenant, the applied bundle this process last recorded in the
// tenant's status. The informer cache lags behind the API server under load: a
// reconcile woken by an event of an object it just applied can read the tenant as it
// was before its own status write, see no applied bundle, apply the whole bundle
// again, and then lose its status write to a conflict. Measured at 1,000 tenants on
// two busy cores, about a fifth of the tenants did so once. A reconcile reading such a
// copy waits for the cache instead (the "expectations" of Kubernetes' own controllers).
type ownWrites struct{ m sync.Map } // types.UID → ownWrite

// ownWrite is one recorded status write.
type ownWrite struct {
	generation    int64
	appliedDigest string
	at            time.Time
}

// record notes a status write that succeeded.
func (o *ownWrites) record(t *evav1.EvaTenant, now time.Time) {
	if t.Status.AppliedDigest == "" {
		o.m.Delete(t.UID)
		return
	}
	o.m.Store(t.UID, ownWrite{generation: t.Generation, appliedDigest: t.Status.AppliedDigest, at: now})
}

// behind says whether t, as read from the cache, predates the last status write of
// this process: the same spec (generation) and another applied bundle, within
// CacheLagWait of the write. A copy that shows the write forgets it.
func (o *ownWrites) behind(t *evav1.EvaTenant, now time.Time) bool {
	v, ok := o.m.Load(t.UID)
	if !ok {
		return false
	}
	w := v.(ownWrite)
	if t.Generation != w.generation || t.Status.AppliedDigest == w.appliedDigest || now.Sub(w.at) > CacheLagWait {
		o.m.Delete(t.UID)
		return false
	}
	return true
}

// forget drops a tenant that is gone.
func (o *ownWrites) forget(uid types.UID) { o.m.Delete(uid) }
