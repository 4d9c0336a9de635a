package testcluster

import (
	"context"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/testenv"
)

// StartMessaging starts, for this cluster, a JetStream server of its own (its store in
// the cluster's folder), a second one in operator mode for the tenants' own accounts
// (AccountsNATS), and the two stand-ins that play NACK and the ingress controller
// against them until stop is called. It returns a client of the first, and records its
// URL in MessagingURL.
func (c *Cluster) StartMessaging(ctx context.Context) (js *messaging.Client, stop func(), err error) {
	nats, err := testenv.RunNATS(-1, filepath.Join(c.Dir, "jetstream"))
	if err != nil {
		return nil, nil, err
	}
	c.MessagingURL = nats.ClientURL()
	js, err = messaging.Connect(messaging.Config{URL: nats.ClientURL()})
	if err != nil {
		nats.Shutdown()
		return nil, nil, err
	}
	standIns, err := client.New(c.Config, client.Options{Scheme: StandInScheme()})
	if err != nil {
		js.Close()
		nats.Shutdown()
		return nil, nil, err
	}
	accounts, err := testenv.RunNATSOperator(filepath.Join(c.Dir, "jetstream-accounts"))
	if err != nil {
		js.Close()
		nats.Shutdown()
		return nil, nil, err
	}
	c.AccountsNATS = accounts
	ctx, cancel := context.WithCancel(ctx)
	go RunNACKStandIn(ctx, standIns, js, accounts.URL)
	go RunIngressStandIn(ctx, standIns)
	return js, func() { cancel(); js.Close(); nats.Shutdown(); accounts.Server.Shutdown() }, nil
}
