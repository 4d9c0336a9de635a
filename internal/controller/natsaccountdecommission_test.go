package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestWorkloadsHoldingEveryConnectionCannotStopADecommission: a tenant's workloads (or
// whoever took their credentials) open every connection its tier allows, then the
// tenant is decommissioned. In direct mode the operator, whose connection to the
// account would be refused, revokes the workloads' user first; in NACK mode it writes
// NACK a new user and revokes the old one (NACK, as its pool does, connects when it has
// work). The server cuts them, the streams go, then the account. Seen failing before
// the revocation: the tenant was never gone, its streams not deleted ("maximum account
// active connections exceeded"); in NACK mode, with the stand-in connecting per use as
// NACK does, its Streams kept NACK's finalizer and the namespace stayed.
func TestWorkloadsHoldingEveryConnectionCannotStopADecommission(t *testing.T) {
	t.Run("direct", func(t *testing.T) { workloadsHoldingEveryConnection(t, "ACCXAA", false) })
	t.Run("nack", func(t *testing.T) { workloadsHoldingEveryConnection(t, "ACCXAB", true) })
}

func workloadsHoldingEveryConnection(t *testing.T, code string, nack bool) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "exhausted-"+strings.ToLower(code))
	startAccountsOperator(t, n, signer, system, nack)
	if nack {
		startStandIn(t, withJetStream(standInJetStream(t)), withNATSAccounts(n.URL))
	} else {
		startStandIn(t)
	}
	ns := newTestNamespace(t)
	a := newTenant(ns, code, evav1.TierStarter)
	createTenant(t, a)
	waitPhase(t, a, evav1.PhaseActive)
	ctx := context.Background()
	creds := tenantCreds(t, code)
	held := holdEveryConnection(t, n.URL, creds, evav1.TierStarter)
	if nack {
		// The stand-in's namespace controller does not wait for what the namespace
		// holds, as the real one does: the saga is held at its releases, after the
		// Streams' deletion, until NACK has deleted the streams.
		holdUninstall(t, code, []string{"crm"})
	}
	if err := k8s.Delete(ctx, getTenant(t, a)); err != nil {
		t.Fatal(err)
	}
	if nack {
		eventually(t, waitFor, "NACK deleted the streams in the tenant's account", func() error {
			var streams nackv1beta2.StreamList
			if err := k8s.List(ctx, &streams, client.InNamespace(tenant.Namespace(code))); err != nil {
				return err
			}
			for _, st := range streams.Items {
				return fmt.Errorf("Stream %s is still there, held by %v", st.Name, st.Finalizers)
			}
			return nil
		})
		finishUninstall(t, code, []string{"crm"})
	}
	eventually(t, waitFor, code+" decommissioned", func() error {
		var got evav1.EvaTenant
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), &got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v): %v", err, got.Status.Conditions)
		}
		return nil
	})
	cutOff(t, held)
}

// holdEveryConnection opens, with creds, every connection tier allows its account, as
// a tenant's workloads (or whoever took their credentials) may; they are closed when
// the test ends.
func holdEveryConnection(t *testing.T, url string, creds []byte, tier evav1.Tier) []*nats.Conn {
	t.Helper()
	limit := tenant.DefaultCatalog().Tiers[tier].Account.Connections
	var held []*nats.Conn
	t.Cleanup(func() {
		for _, nc := range held {
			nc.Close()
		}
	})
	eventually(t, waitFor, "every connection of the tier taken", func() error {
		for int64(len(held)) < limit {
			nc, err := dialCreds(url, creds)
			if err != nil {
				return fmt.Errorf("connection %d of %d: %w", len(held)+1, limit, err)
			}
			held = append(held, nc)
		}
		if nc, err := dialCreds(url, creds); err == nil {
			nc.Close()
			return fmt.Errorf("a connection beyond the tier's %d was taken", limit)
		}
		return nil
	})
	return held
}

// cutOff fails the test unless every connection of held is down.
func cutOff(t *testing.T, held []*nats.Conn) {
	t.Helper()
	for i, nc := range held {
		if !nc.IsClosed() && nc.Status() == nats.CONNECTED {
			t.Errorf("the workloads' connection %d is still up", i)
			return
		}
	}
}
