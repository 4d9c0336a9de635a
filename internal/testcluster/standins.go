package testcluster

import (
	"context"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/messaging"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/tenant"
)

// The two stand-ins of the end-to-end cluster: the only components that cannot be had
// here. NACK's module is refused by the Go module proxy, and no ingress controller has
// a load balancer to give out on this machine. Each does for real what it can: the NACK
// stand-in creates and deletes the streams in a real JetStream server.

// standInInterval is how often the stand-ins look at the cluster.
const standInInterval = 300 * time.Millisecond

// StandInScheme knows the kinds the stand-ins read and write.
func StandInScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = nackv1beta2.AddToScheme(s)
	return s
}

// RunNACKStandIn plays NACK's stream controller until ctx ends: every Stream object gets
// its stream created (or updated) in JetStream, then Ready=True with the generation it
// saw; a stream whose object is gone is deleted from JetStream.
func RunNACKStandIn(ctx context.Context, c client.Client, js *messaging.Client) {
	known := map[string]bool{}
	for ctx.Err() == nil {
		var streams nackv1beta2.StreamList
		if err := c.List(ctx, &streams); err == nil {
			seen := map[string]bool{}
			for i := range streams.Items {
				st := &streams.Items[i]
				seen[st.Spec.Name] = true
				if st.DeletionTimestamp != nil || apimeta.IsStatusConditionTrue(st.Status.Conditions, "Ready") && st.Status.ObservedGeneration == st.Generation {
					continue
				}
				maxAge, _ := time.ParseDuration(st.Spec.MaxAge)
				spec := messaging.StreamSpec{Name: st.Spec.Name, Subjects: st.Spec.Subjects, Limits: tenant.StreamLimits{
					MaxMsgs: st.Spec.MaxMsgs, MaxBytes: st.Spec.MaxBytes, MaxAge: metav1.Duration{Duration: maxAge}, Replicas: 1}}
				ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Created",
					Message: "stream created in JetStream (NACK stand-in)", ObservedGeneration: st.Generation}
				if _, err := js.Ensure(ctx, spec); err != nil {
					// As NACK does: the object says why, and the next pass tries again.
					ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "Errored", err.Error()
					if c := apimeta.FindStatusCondition(st.Status.Conditions, "Ready"); c != nil && c.Message == ready.Message {
						continue
					}
				} else {
					known[st.Spec.Name] = true
				}
				base := st.DeepCopy()
				st.Status.ObservedGeneration = st.Generation
				apimeta.SetStatusCondition(&st.Status.Conditions, ready)
				_ = c.Status().Patch(ctx, st, client.MergeFrom(base))
			}
			for name := range known {
				if !seen[name] && js.Delete(ctx, name) == nil {
					delete(known, name)
				}
			}
		}
		sleep(ctx, standInInterval)
	}
}

// RunIngressStandIn plays an ingress controller's status writer until ctx ends: every
// Ingress gets a load-balancer address.
func RunIngressStandIn(ctx context.Context, c client.Client) {
	for ctx.Err() == nil {
		var list networkingv1.IngressList
		if err := c.List(ctx, &list); err == nil {
			for i := range list.Items {
				ing := &list.Items[i]
				if len(ing.Status.LoadBalancer.Ingress) > 0 || ing.DeletionTimestamp != nil {
					continue
				}
				base := ing.DeepCopy()
				ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "127.0.0.1"}}
				_ = c.Status().Patch(ctx, ing, client.MergeFrom(base))
			}
		}
		sleep(ctx, standInInterval)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
