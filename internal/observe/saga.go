package observe

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/saga"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// SagaObjects reads into o what the decommission saga's step o.Step waits on, from the
// tenant's cluster c: whether the namespace is gone, and at StreamsRemoved the Stream
// objects left, at ReleasesRemoved the HelmReleases left (under Flux). The operator and
// evactl (the source of a tenant file's move) read them here alike; a kind the cluster
// does not serve has none left. Argo CD's Applications, in Argo CD's namespace, are the
// operator's to read.
func SagaObjects(ctx context.Context, c client.Reader, code string, o *saga.Observed) error {
	ns := tenant.Namespace(code)
	o.Namespace = ns
	found, err := Get(ctx, c, types.NamespacedName{Name: ns}, &corev1.Namespace{})
	if err != nil {
		return err
	}
	o.NamespaceGone = !found
	switch {
	case o.Step == evav1.StepStreamsRemoved:
		for _, stream := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			found, err := Get(ctx, c, types.NamespacedName{Namespace: ns, Name: tenant.StreamObjectName(stream)}, &nackv1beta2.Stream{})
			if err != nil && !apimeta.IsNoMatchError(err) {
				return err
			}
			if found {
				o.StreamsLeft = append(o.StreamsLeft, stream)
			}
		}
	case o.Step == evav1.StepReleasesRemoved && !o.ArgoCD:
		var releases helmv2.HelmReleaseList
		if err := c.List(ctx, &releases, client.InNamespace(ns)); err != nil && !apimeta.IsNoMatchError(err) {
			return fmt.Errorf("listing HelmReleases in %s: %w", ns, err)
		}
		for _, hr := range releases.Items {
			o.ReleasesLeft = append(o.ReleasesLeft, hr.Name)
		}
	}
	return nil
}

// SagaDeliveries are the saga's view of the tenant's two delivery objects.
func SagaDeliveries(g *status.GitOpsState) (foundation, workloads saga.Delivery) {
	delivery := func(k status.DeliveryState) saga.Delivery {
		return saga.Delivery{Name: k.Kind + " " + k.Name, Found: k.Found, Applied: k.Applied}
	}
	return delivery(g.Foundation), delivery(g.Workloads)
}
