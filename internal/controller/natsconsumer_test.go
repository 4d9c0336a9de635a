package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// TestPlatformConsumerReceivesTenantEvents: an environment with natsConsumer, in direct
// mode on a real server in operator mode. Once two tenants are Active, the credentials
// the operator wrote for the platform's consumer (eva-system/eva-nats-consumer) receive
// each tenant's events, published with the tenant's own credentials, and none of its
// commands. After one tenant's decommission the other's still arrive. Seen failing with
// the tenants' imports left out of their accounts (the consumer received nothing).
func TestPlatformConsumerReceivesTenantEvents(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	dropConsumerCreds(t)
	signer, system := platformNATSSecrets(t, n, "consumer")
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		accounts := &Accounts{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: claimsNamespace,
			SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second},
			ConsumerSubjects: []string{"events.>"}}
		r.Renderer.Env.Settings.NATSAccounts = true
		r.Accounts, r.DirectAccounts = accounts, true
	})
	startStandIn(t)
	ctx := context.Background()
	ns := newTestNamespace(t)
	a, b := newTenant(ns, "CONSAA", evav1.TierStarter), newTenant(ns, "CONSBB", evav1.TierStarter)
	createTenant(t, a)
	createTenant(t, b)
	waitPhase(t, a, evav1.PhaseActive)
	waitPhase(t, b, evav1.PhaseActive)

	var creds corev1.Secret
	eventually(t, waitFor, "the consumer's credentials", func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: ConsumerCredsSecret}, &creds)
	})
	platform, err := dialCreds(n.URL, creds.Data[tenant.NATSCredsKey])
	if err != nil {
		t.Fatalf("the consumer connects with its credentials: %v", err)
	}
	defer platform.Close()
	events, _ := platform.SubscribeSync("capsule.*.events.>")
	commands, _ := platform.SubscribeSync("capsule.*.commands.>")
	_ = platform.Flush()
	conns := map[string]*nats.Conn{}
	for _, code := range []string{"CONSAA", "CONSBB"} {
		nc, err := dialCreds(n.URL, tenantCreds(t, code))
		if err != nil {
			t.Fatalf("%s's workloads connect: %v", code, err)
		}
		defer nc.Close()
		conns[code] = nc
		_ = nc.Publish("capsule."+code+".commands.run", nil)
		receives(t, events, nc, "capsule."+code+".events.order")
	}
	if m, err := commands.NextMsg(300 * time.Millisecond); err == nil {
		t.Errorf("the consumer received the command %s", m.Subject)
	}

	if err := k8s.Delete(ctx, getTenant(t, a)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*waitFor, "CONSAA gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), &evav1.EvaTenant{}); !apierrors.IsNotFound(err) {
			return errNot("deleted")
		}
		return nil
	})
	receives(t, events, conns["CONSBB"], "capsule.CONSBB.events.after")
}

// TestSigningKeyRotationReachesTheConsumer: the platform gives Eva a new operator
// signing key (both listed by its operator) while the operator runs. At a tenant's next
// reconcile its account is signed again with the new key and sends its events to the
// consumer account derived from it, whose credentials the operator writes again. Seen
// failing with the signing key left out of what decides that an account was pushed
// already: the tenant stayed on the old consumer, and the new one's credentials were
// never written, until a restart.
func TestSigningKeyRotationReachesTheConsumer(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	dropConsumerCreds(t)
	signer, system := platformNATSSecrets(t, n, "rotation")
	var clock atomic.Int64 // how far ahead of the real clock the operator's is
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		accounts := &Accounts{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: claimsNamespace,
			SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second},
			ConsumerSubjects: []string{"events.>"}, Now: func() time.Time { return time.Now().Add(time.Duration(clock.Load())) }}
		r.Renderer.Env.Settings.NATSAccounts = true
		r.Accounts, r.DirectAccounts = accounts, true
	})
	startStandIn(t)
	ctx := context.Background()
	tn := newTenant(newTestNamespace(t), "ROTSGN", evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseActive)
	workload, err := dialCreds(n.URL, tenantCreds(t, "ROTSGN"))
	if err != nil {
		t.Fatalf("the workload connects: %v", err)
	}
	defer workload.Close()
	consumerOf := func(account string) *nats.Subscription {
		var creds corev1.Secret
		eventually(t, 2*waitFor, "the consumer's credentials of account "+account, func() error {
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: ConsumerCredsSecret}, &creds); err != nil {
				return err
			}
			if got := creds.Annotations[annotationConsumerAccount]; account != "" && got != account {
				return errNot("of " + account + " (" + got + ")")
			}
			return nil
		})
		platform, err := dialCreds(n.URL, creds.Data[tenant.NATSCredsKey])
		if err != nil {
			t.Fatalf("the consumer connects: %v", err)
		}
		t.Cleanup(platform.Close)
		events, _ := platform.SubscribeSync("capsule.*.events.>")
		_ = platform.Flush()
		return events
	}
	receives(t, consumerOf(""), workload, "capsule.ROTSGN.events.before")

	seed, _ := n.NextSigner.Seed()
	var secret corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: signer}, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{"seed": seed}
	if err := k8s.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	clock.Store(int64(signerTTL + time.Second)) // the key read is stale: read again
	next, err := natsaccount.NewConsumer(n.NextSigner, []string{"events.>"})
	if err != nil {
		t.Fatal(err)
	}
	nextPub, _ := next.Key.PublicKey()
	poke(t, tn, "rotated") // stands for the tenant's next resync
	receives(t, consumerOf(nextPub), workload, "capsule.ROTSGN.events.after")
}

// receives publishes on subject with nc until the consumer's subscription events
// receives it.
func receives(t *testing.T, events *nats.Subscription, nc *nats.Conn, subject string) {
	t.Helper()
	eventually(t, waitFor, "the consumer receives "+subject, func() error {
		_ = nc.Publish(subject, nil)
		_ = nc.Flush()
		for {
			m, err := events.NextMsg(200 * time.Millisecond)
			if err != nil {
				return errNot("received " + subject)
			}
			if m.Subject == subject {
				return nil
			}
		}
	})
}

// TestPlatformConsumerReceivesTenantFilesEvents: tenant files in NACK mode. The account
// the operator makes for a tenant file sends its events to the platform's consumer,
// as an EvaTenant's does.
func TestPlatformConsumerReceivesTenantFilesEvents(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	dropConsumerCreds(t)
	signer, system := platformNATSSecrets(t, n, "consumer-files")
	startNACKAccounts(t, n, signer, system, "events.>")
	startStandIn(t)
	ctx := context.Background()
	applyFileFoundation(t, "FILECA", nil)
	var creds corev1.Secret
	var file []byte
	eventually(t, waitFor, "the consumer's and FILECA's credentials", func() error {
		if file = fileCreds(ctx, "FILECA"); file == nil {
			return errNot("FILECA's written")
		}
		return k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: ConsumerCredsSecret}, &creds)
	})
	platform, err := dialCreds(n.URL, creds.Data[tenant.NATSCredsKey])
	if err != nil {
		t.Fatal(err)
	}
	defer platform.Close()
	events, _ := platform.SubscribeSync("capsule.*.events.>")
	_ = platform.Flush()
	nc, err := dialCreds(n.URL, file)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	receives(t, events, nc, "capsule.FILECA.events.order")
}

// dropConsumerCreds deletes the consumer's credentials Secret once the test's operator
// has stopped: registered before the operator starts, as cleanups run last-first. A
// cleanup registered after it ran while the operator still wrote the Secret, which the
// next test then read: credentials of another test's server ("Authorization
// Violation", TestSigningKeyRotationReachesTheConsumer in a full run).
func dropConsumerCreds(t *testing.T) {
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: claimsNamespace, Name: ConsumerCredsSecret}})
	})
}
