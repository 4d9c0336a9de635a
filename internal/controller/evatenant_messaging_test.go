package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

func natsOn(t *testing.T, port int, dir string) *server.Server {
	return testenv.StartNATS(t, port, dir)
}

// TestDirectMessagingOutage runs the operator in direct messaging mode and stops NATS
// during provisioning and during decommissioning.
func TestDirectMessagingOutage(t *testing.T) {
	port, dir := testenv.FreePort(t), t.TempDir()
	nats := natsOn(t, port, dir)
	client, err := messaging.Connect(messaging.Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) { r.Streams = client })

	nats.Shutdown()
	nats.WaitForShutdown()
	code := "NATSDN"
	tn := newTenant(newTestNamespace(t), code, evav1.TierStarter)
	createTenant(t, tn)
	startStandIn(t)
	eventually(t, waitFor, "MessagingUnavailable", func() error {
		c := condition(getTenant(t, tn), evav1.ConditionProvisioned)
		if c.Reason != status.ReasonMessagingDown {
			return fmt.Errorf("Provisioned %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})

	nats = natsOn(t, port, dir)
	defer nats.Shutdown()
	waitPhase(t, tn, evav1.PhaseActive)
	for _, s := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
		if ok, err := client.Exists(context.Background(), s); !ok || err != nil {
			t.Fatalf("stream %s after recovery: %v %v", s, ok, err)
		}
	}

	// Decommission while NATS is down: the failure is recorded, the finalizer kept.
	nats.Shutdown()
	nats.WaitForShutdown()
	if err := k8s.Delete(context.Background(), getTenant(t, tn)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "stream deletion failure recorded", func() error {
		c := condition(getTenant(t, tn), evav1.ConditionReady)
		if c.Reason != status.ReasonStepFailed || !strings.Contains(c.Message, "messaging unavailable") {
			return fmt.Errorf("Ready %s: %s", c.Reason, c.Message)
		}
		return nil
	})
	nats = natsOn(t, port, dir)
	defer nats.Shutdown()
	eventually(t, 2*waitFor, "tenant gone once NATS is back", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: tn.Namespace, Name: tn.Name}, &evav1.EvaTenant{})
		if !apierrors.IsNotFound(err) {
			return errNot("deleted")
		}
		return nil
	})
	if ok, _ := client.Exists(context.Background(), tenant.EventsStream(code)); ok {
		t.Error("the events stream survived the decommission")
	}
}
