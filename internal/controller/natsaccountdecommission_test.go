package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestWorkloadsHoldingEveryConnectionCannotStopADecommission: a tenant's workloads (or
// whoever took their credentials) open every connection its tier allows, then the
// tenant is decommissioned. The operator, whose connection to the account would be
// refused, revokes the workloads' user first; the server cuts them, the streams go,
// then the account. Seen failing before the revocation: the tenant was never gone,
// its streams not deleted ("maximum account active connections exceeded").
func TestWorkloadsHoldingEveryConnectionCannotStopADecommission(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "exhausted")
	startAccountsOperator(t, n, signer, system)
	startStandIn(t)
	ns := newTestNamespace(t)
	a := newTenant(ns, "ACCXAA", evav1.TierStarter)
	createTenant(t, a)
	waitPhase(t, a, evav1.PhaseActive)
	ctx := context.Background()
	creds := tenantCreds(t, "ACCXAA")
	limit := tenant.DefaultCatalog().Tiers[evav1.TierStarter].Account.Connections
	var held []*nats.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	eventually(t, waitFor, "every connection of the tier taken", func() error {
		for int64(len(held)) < limit {
			nc, err := dialCreds(n.URL, creds)
			if err != nil {
				return fmt.Errorf("connection %d of %d: %w", len(held)+1, limit, err)
			}
			held = append(held, nc)
		}
		if nc, err := dialCreds(n.URL, creds); err == nil {
			nc.Close()
			return fmt.Errorf("a connection beyond the tier's %d was taken", limit)
		}
		return nil
	})

	if err := k8s.Delete(ctx, getTenant(t, a)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "ACCXAA decommissioned", func() error {
		var got evav1.EvaTenant
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), &got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v): %v", err, got.Status.Conditions)
		}
		return nil
	})
	for i, nc := range held {
		if !nc.IsClosed() && nc.Status() == nats.CONNECTED {
			t.Errorf("the workloads' connection %d is still up after the decommission", i)
			break
		}
	}
}
