package controller

import (
	"maps"
	"time"
)

// accountCacheTTL is how long the operator uses what it keeps of a tenant's account
// (its key Secret) without reading it again. The operator that serves a tenant is the
// one writer of its key Secret and updates what it keeps with every write, so the
// entry is current; the TTL bounds how long another writer's change (a tenant handed
// to another operator version and back) goes unseen. Without it every reconcile of
// every tenant read its key Secret from the API server.
const accountCacheTTL = 10 * time.Minute

// cachedAccount is what the operator keeps of the tenant's account, if it was read or
// written within accountCacheTTL: a copy the caller may change.
func (a *Accounts) cachedAccount(code string) *account {
	a.mu.Lock()
	defer a.mu.Unlock()
	entry, ok := a.accounts[code]
	if !ok || a.now().Sub(entry.at) >= accountCacheTTL {
		return nil
	}
	return entry.acct.clone()
}

// remember keeps a copy of the tenant's account as its key Secret now is.
func (a *Accounts) remember(code string, acct *account) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.accounts == nil {
		a.accounts = map[string]cachedAccount{}
	}
	a.accounts[code] = cachedAccount{acct: acct.clone(), at: a.now()}
}

// forget drops what the operator keeps of the tenant's account: it is read again.
func (a *Accounts) forget(code string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.accounts, code)
}

type cachedAccount struct {
	acct *account
	at   time.Time
}

// clone copies the account, its key Secret without its managed fields.
func (acct *account) clone() *account {
	out := *acct
	out.revoked = maps.Clone(acct.revoked)
	out.secret = acct.secret.DeepCopy()
	out.secret.ManagedFields = nil
	return &out
}
