package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/natsaccount"
)

// The operator's connections to tenants' accounts. Each is a user of the tenant's
// account, so it takes one of the connections of the tenant's tier, and holds a read
// buffer and goroutines of its own (about 50 kB): kept for every tenant, 10,000 tenants
// cost the operator half a gigabyte and each tenant a connection. They are leased to a
// reconcile while it makes or deletes the tenant's streams, kept idle for a moment after
// (the tenant's next reconcile comes soon while it provisions), and closed once idle for
// longer than Accounts.clientIdle or when more than maxIdleClients are idle.
const (
	defaultClientIdle = 30 * time.Second
	maxIdleClients    = 16
)

// pooledClient is one connection to a tenant's account.
type pooledClient struct {
	code    string
	client  *messaging.Client
	leases  int
	idle    time.Time // when the last lease ended
	retired bool      // out of the pool: closed when the last lease ends
}

// leaseClient returns a connection to the tenant's account (a user signed with its key)
// and the function that gives it back, which the caller calls once done (an error
// too returns one, doing nothing).
func (a *Accounts) leaseClient(code string, key nkeys.KeyPair) (*messaging.Client, func(), error) {
	if p := a.takeClient(code); p != nil {
		return p.client, func() { a.giveBack(p) }, nil
	}
	c, err := a.dialAccount(code, key)
	if err != nil {
		return nil, func() {}, err
	}
	a.mu.Lock()
	p := a.clients[code]
	if p != nil && p.client.IsClosed() {
		a.retire(p)
		p = nil
	}
	if p == nil {
		p = &pooledClient{code: code, client: c}
		if a.clients == nil {
			a.clients = map[string]*pooledClient{}
		}
		a.clients[code] = p
	} else {
		a.doomed = append(a.doomed, c) // another reconcile connected first: one connection is enough
	}
	p.leases++
	a.unlockClosing()
	return p.client, func() { a.giveBack(p) }, nil
}

// takeClient leases the pool's connection to the tenant's account, if it has one.
func (a *Accounts) takeClient(code string) *pooledClient {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.clients[code]
	if p == nil || p.client.IsClosed() {
		return nil
	}
	p.leases++
	return p
}

// dialAccount connects as a new user of the tenant's account.
func (a *Accounts) dialAccount(code string, key nkeys.KeyPair) (*messaging.Client, error) {
	creds, _, err := natsaccount.User(code, "eva-operator", key, a.now())
	if err != nil {
		return nil, err
	}
	nc, err := a.connect(creds, "eva-operator-"+code)
	if errors.Is(err, nats.ErrMaxAccountConnectionsExceeded) {
		return nil, fmt.Errorf("%w of %s: its workloads hold every connection its tier allows, the operator's included: %w",
			errAccount, code, err)
	}
	if err != nil {
		// An account the server does not take (not signed by a key of its operator, or
		// the resolver not a full one) refuses its users: say so.
		return nil, fmt.Errorf("%w of %s: the server refuses its users (is %s's key one of the NATS operator's signing keys, and the resolver a full one?): %w",
			errAccount, code, a.SignerSecret, err)
	}
	return messaging.FromConn(nc, a.Config.Timeout)
}

// giveBack ends a lease, closing what the pool no longer keeps.
func (a *Accounts) giveBack(p *pooledClient) {
	a.mu.Lock()
	p.leases--
	p.idle = a.now()
	if p.retired && p.leases == 0 {
		a.doomed = append(a.doomed, p.client)
	}
	a.trimClients()
	a.unlockClosing()
}

// retireClient takes the tenant's connection out of the pool (its account is closed):
// closed now, or when its last lease ends.
func (a *Accounts) retireClient(code string) {
	a.mu.Lock()
	if p := a.clients[code]; p != nil {
		a.retire(p)
	}
	a.unlockClosing()
}

// retire takes p out of the pool, to be closed by unlockClosing unless it is leased;
// a.mu is held.
func (a *Accounts) retire(p *pooledClient) {
	delete(a.clients, p.code)
	p.retired = true
	if p.leases == 0 {
		a.doomed = append(a.doomed, p.client)
	}
}

// unlockClosing unlocks a.mu, then closes the connections retired meanwhile: a close
// flushes to the socket, which must hold up no other tenant's reconcile.
func (a *Accounts) unlockClosing() {
	doomed := a.doomed
	a.doomed = nil
	a.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
}

// trimClients retires the connections idle for longer than clientIdle, and the longest
// idle beyond maxIdleClients; a.mu is held. While any stays idle, it looks again when
// the first of them has been idle for clientIdle.
func (a *Accounts) trimClients() {
	now, ttl := a.now(), a.clientIdle
	if ttl <= 0 {
		ttl = defaultClientIdle
	}
	var idle []*pooledClient
	for _, p := range a.clients {
		switch {
		case p.leases > 0:
		case now.Sub(p.idle) >= ttl || p.client.IsClosed():
			a.retire(p)
		default:
			idle = append(idle, p)
		}
	}
	slices.SortFunc(idle, func(x, y *pooledClient) int { return x.idle.Compare(y.idle) }) // the longest idle first
	if len(idle) > maxIdleClients {
		for _, p := range idle[:len(idle)-maxIdleClients] {
			a.retire(p)
		}
		idle = idle[len(idle)-maxIdleClients:]
	}
	if len(idle) > 0 && !a.trimPending {
		a.trimPending = true
		time.AfterFunc(idle[0].idle.Add(ttl).Sub(now), func() {
			a.mu.Lock()
			a.trimPending = false
			a.trimClients()
			a.unlockClosing()
		})
	}
}
