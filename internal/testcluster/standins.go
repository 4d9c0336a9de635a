package testcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/messaging"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/natsaccount"
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

// RunNACKStandIn plays NACK's stream and account controllers until ctx ends: every
// Stream object gets its stream created (or updated) in JetStream, then Ready=True with
// the generation it saw; a stream whose object is gone is deleted from JetStream. A
// Stream naming a NACK Account (spec.account) is made, as NACK makes it, with the
// credentials of that Account's Secret (in the Stream's namespace) on the server at url;
// the others with js, NACK's own connection. A connection through an Account is closed
// once its work is done, as NACK's pool closes one a grace period after its last use:
// each time NACK has work it needs a connection the account allows. Every Account is
// Ready, as NACK's are.
// Streams made through an Account, and the Accounts, carry NACK's finalizers as NACK's
// do: such a Stream's deletion deletes its stream with the credentials its Account names
// then (none left: it stays, as with NACK), and an Account is let go once no Stream of
// its namespace names it.
func RunNACKStandIn(ctx context.Context, c client.Client, js *messaging.Client, url string) {
	n := &nackStandIn{c: c, js: js, url: url, known: map[string]bool{}}
	for ctx.Err() == nil {
		n.accounts(ctx)
		n.streams(ctx)
		sleep(ctx, standInInterval)
	}
}

// nackStandIn is the state of RunNACKStandIn: the streams made with NACK's own
// connection (known), deleted from JetStream once their object is gone.
type nackStandIn struct {
	c     client.Client
	js    *messaging.Client
	url   string
	known map[string]bool
}

// NACK's finalizers (nack's internal/controller/types.go).
const (
	nackAccountFinalizer = "account.nats.io/finalizer"
	nackStreamFinalizer  = "stream.nats.io/finalizer"
)

func (n *nackStandIn) accounts(ctx context.Context) {
	var accounts nackv1beta2.AccountList
	var streams nackv1beta2.StreamList
	if n.c.List(ctx, &accounts) != nil || n.c.List(ctx, &streams) != nil {
		return
	}
	for i := range accounts.Items {
		a := &accounts.Items[i]
		if a.DeletionTimestamp != nil {
			named := slices.ContainsFunc(streams.Items, func(st nackv1beta2.Stream) bool {
				return st.Namespace == a.Namespace && st.Spec.Account != nil && *st.Spec.Account == a.Name
			})
			if !named {
				n.setFinalizer(ctx, a, nackAccountFinalizer, false)
			}
			continue
		}
		n.setFinalizer(ctx, a, nackAccountFinalizer, true)
		if apimeta.IsStatusConditionTrue(a.Status.Conditions, "Ready") && a.Status.ObservedGeneration == a.Generation {
			continue
		}
		base := a.DeepCopy()
		a.Status.ObservedGeneration = a.Generation
		apimeta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue,
			Reason: "Ready", Message: "Account is ready (NACK stand-in)", ObservedGeneration: a.Generation})
		_ = n.c.Status().Patch(ctx, a, client.MergeFrom(base))
	}
}

func (n *nackStandIn) streams(ctx context.Context) {
	var streams nackv1beta2.StreamList
	if err := n.c.List(ctx, &streams); err != nil {
		return
	}
	seen := map[string]bool{}
	for i := range streams.Items {
		st := &streams.Items[i]
		seen[st.Spec.Name] = true
		throughAccount := st.Spec.Account != nil && *st.Spec.Account != ""
		if throughAccount && st.DeletionTimestamp != nil {
			n.deleteThroughAccount(ctx, st)
			continue
		}
		if throughAccount {
			n.setFinalizer(ctx, st, nackStreamFinalizer, true)
		}
		if st.DeletionTimestamp != nil || apimeta.IsStatusConditionTrue(st.Status.Conditions, "Ready") && st.Status.ObservedGeneration == st.Generation {
			continue
		}
		maxAge, _ := time.ParseDuration(st.Spec.MaxAge)
		spec := messaging.StreamSpec{Name: st.Spec.Name, Subjects: st.Spec.Subjects, Limits: tenant.StreamLimits{
			MaxMsgs: st.Spec.MaxMsgs, MaxBytes: st.Spec.MaxBytes, MaxAge: metav1.Duration{Duration: maxAge}, Replicas: 1}}
		ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Created",
			Message: "stream created in JetStream (NACK stand-in)", ObservedGeneration: st.Generation}
		conn, done, err := n.connection(ctx, st)
		if err == nil {
			_, err = conn.Ensure(ctx, spec)
			done()
		}
		if err != nil {
			// As NACK does: the object says why, and the next pass tries again.
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "Errored", err.Error()
			if c := apimeta.FindStatusCondition(st.Status.Conditions, "Ready"); c != nil && c.Message == ready.Message {
				continue
			}
		} else if !throughAccount {
			n.known[st.Spec.Name] = true
		}
		base := st.DeepCopy()
		st.Status.ObservedGeneration = st.Generation
		apimeta.SetStatusCondition(&st.Status.Conditions, ready)
		_ = n.c.Status().Patch(ctx, st, client.MergeFrom(base))
	}
	for name := range n.known {
		if !seen[name] && n.js.Delete(ctx, name) == nil {
			delete(n.known, name)
		}
	}
}

// deleteThroughAccount deletes a Stream's stream with the credentials its Account names
// now, then lets the Stream go; without them it stays, as NACK's does.
func (n *nackStandIn) deleteThroughAccount(ctx context.Context, st *nackv1beta2.Stream) {
	if !slices.Contains(st.Finalizers, nackStreamFinalizer) {
		return
	}
	conn, done, err := n.connection(ctx, st)
	if err == nil {
		err = conn.Delete(ctx, st.Spec.Name)
		done()
	}
	if err != nil {
		return
	}
	n.setFinalizer(ctx, st, nackStreamFinalizer, false)
}

// setFinalizer adds or removes a finalizer of NACK's on obj.
func (n *nackStandIn) setFinalizer(ctx context.Context, obj client.Object, finalizer string, on bool) {
	if slices.Contains(obj.GetFinalizers(), finalizer) == on {
		return
	}
	base := obj.DeepCopyObject().(client.Object)
	if on {
		obj.SetFinalizers(append(obj.GetFinalizers(), finalizer))
	} else {
		obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == finalizer }))
	}
	_ = n.c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})) // a conflict: next pass
}

// connection is what NACK makes the stream with, and the function to call once done
// with it: its own, or a new one of its Account's.
func (n *nackStandIn) connection(ctx context.Context, st *nackv1beta2.Stream) (*messaging.Client, func(), error) {
	if st.Spec.Account == nil || *st.Spec.Account == "" {
		return n.js, func() {}, nil
	}
	conn, err := n.dialAccount(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	return conn, conn.Close, nil
}

// dialAccount connects with the credentials the Stream's Account names now.
func (n *nackStandIn) dialAccount(ctx context.Context, st *nackv1beta2.Stream) (*messaging.Client, error) {
	var account nackv1beta2.Account
	if err := n.c.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: *st.Spec.Account}, &account); err != nil {
		return nil, fmt.Errorf("get account %s: %w", *st.Spec.Account, err)
	}
	if account.Spec.Creds == nil || account.Spec.Creds.Secret == nil {
		return nil, fmt.Errorf("account %s: the stand-in connects with a creds Secret only", account.Name)
	}
	var secret corev1.Secret
	if err := n.c.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: account.Spec.Creds.Secret.Name}, &secret); err != nil {
		return nil, fmt.Errorf("account %s: %w", account.Name, err)
	}
	user, err := natsaccount.CredsOption(secret.Data[account.Spec.Creds.File])
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", account.Name, err)
	}
	nc, err := nats.Connect(n.url, user)
	if err != nil {
		return nil, fmt.Errorf("account %s: connecting: %w", account.Name, err)
	}
	conn, err := messaging.FromConn(nc, 5*time.Second)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return conn, nil
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
