package controller

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/messaging"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// platformNATSSecrets creates, in the operator's namespace, what the platform gives Eva:
// its NATS operator's signing key and a system user's credentials, under names of the
// test's own; they are removed when the test ends.
func platformNATSSecrets(t testing.TB, n *testenv.OperatorNATS, prefix string) (signer, system string) {
	t.Helper()
	seed, _ := n.OperatorSigner.Seed()
	creds, err := os.ReadFile(n.SystemCreds)
	if err != nil {
		t.Fatal(err)
	}
	signer, system = prefix+"-signer", prefix+"-system"
	for name, data := range map[string]map[string][]byte{signer: {"seed": seed}, system: {"creds": creds}} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: claimsNamespace, Name: name}, Data: data}
		if err := k8s.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
	}
	return signer, system
}

// startAccountsOperator starts an operator for an environment with natsAccounts, in
// direct messaging mode (it makes the streams itself) or, with nack, NACK's.
func startAccountsOperator(t *testing.T, n *testenv.OperatorNATS, signer, system string, nack ...bool) (*Accounts, *secretReads) {
	t.Helper()
	reads := &secretReads{}
	var accounts *Accounts
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		reads.Reader = mgr.GetAPIReader()
		accounts = &Accounts{Reader: reads, Client: &secretWrites{Client: mgr.GetClient()}, Namespace: claimsNamespace,
			SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second},
			clientIdle: 300 * time.Millisecond}
		r.Renderer.Env.Settings.NATSAccounts = true
		r.Accounts, r.DirectAccounts = accounts, len(nack) == 0 || !nack[0]
		if !r.DirectAccounts {
			// As the operator binary in NACK mode: held credentials, NACKAccounts.
			accounts.HoldCreds = true
			nacks := &NACKAccounts{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Accounts: accounts,
				Catalog: r.Renderer.Catalog, Recorder: mgr.GetEventRecorder("eva-operator")}
			if err := nacks.SetupWithManager(mgr); err != nil {
				t.Fatal(err)
			}
		}
	})
	return accounts, reads
}

// secretReads counts the reads Accounts makes of the API server, by name.
type secretReads struct {
	client.Reader
	n     atomic.Int64
	mu    sync.Mutex
	names []string
}

func (r *secretReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.n.Add(1)
	r.mu.Lock()
	r.names = append(r.names, key.Name)
	r.mu.Unlock()
	return r.Reader.Get(ctx, key, obj, opts...)
}

// of counts the reads of the Secrets named.
func (r *secretReads) of(names ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, name := range r.names {
		if slices.Contains(names, name) {
			n++
		}
	}
	return n
}

// secretWrites records the writes Accounts makes to the API server that it takes. A
// write refused is not counted: the credentials' Secret is written again when its
// namespace was not applied yet (a reconcile whose apply failed, under a loaded
// machine), which costs a request but changes nothing.
type secretWrites struct {
	client.Client
	mu      sync.Mutex
	refused []string
	made    []string
}

func (w *secretWrites) count(err error, what string, obj client.Object) error {
	if err == nil {
		w.mu.Lock()
		w.made = append(w.made, what+" "+obj.GetNamespace()+"/"+obj.GetName())
		w.mu.Unlock()
	} else {
		w.mu.Lock()
		w.refused = append(w.refused, err.Error())
		w.mu.Unlock()
	}
	return err
}

func (w *secretWrites) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return w.count(w.Client.Create(ctx, obj, opts...), "create", obj)
}

func (w *secretWrites) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return w.count(w.Client.Update(ctx, obj, opts...), "update", obj)
}

func (w *secretWrites) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return w.count(w.Client.Patch(ctx, obj, patch, opts...), "patch", obj)
}

// tenantCreds reads the workloads' credentials the operator wrote in the tenant's
// namespace.
func tenantCreds(t *testing.T, code string) []byte {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code)}, &s); err != nil {
		t.Fatalf("the NATS credentials of %s: %v", code, err)
	}
	return s.Data[tenant.NATSCredsKey]
}

func dialCreds(url string, creds []byte) (*nats.Conn, error) {
	user, err := natsaccount.CredsOption(creds)
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, nats.MaxReconnects(0), user)
}

// TestEachTenantHasItsOwnNATSAccount: in direct messaging mode with accounts, on a real
// NATS server in operator mode, two tenants become Active each with an account of its
// own (status.natsAccount) holding its two streams, and credentials in its namespace
// that reach its streams and not the other's. Decommissioned, a tenant's streams go,
// then its account: its credentials are refused and its key forgotten.
func TestEachTenantHasItsOwnNATSAccount(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "accounts")
	accounts, reads := startAccountsOperator(t, n, signer, system)
	startStandIn(t)
	ns := newTestNamespace(t)
	a, b := newTenant(ns, "ACCTAA", evav1.TierStarter), newTenant(ns, "ACCTBB", evav1.TierStarter)
	createTenant(t, a)
	createTenant(t, b)
	ga, gb := waitPhase(t, a, evav1.PhaseActive), waitPhase(t, b, evav1.PhaseActive)
	// Per tenant: its key Secret made with its workloads' first user, and their
	// credentials written into its namespace: two writes, and never again; its key
	// Secret never read (made without a read, then kept), and the platform's Secrets
	// read once for both. The budget: at most two requests per tenant.
	// (The operator serves every namespace: other tests' tenants are left out.)
	// Seen failing before the account was kept: 4 reads of the keys, 3 of the platform's.
	if keys, platform := reads.of(accountKeySecret("ACCTAA"), accountKeySecret("ACCTBB")), reads.of(signer, system); keys != 0 || platform > 2 {
		t.Errorf("provisioning two tenants' accounts read their key Secrets %d times and the platform's Secrets %d times, want 0 and at most 2", keys, platform)
	}
	writes := accounts.Client.(*secretWrites)
	writes.mu.Lock()
	ours := slices.DeleteFunc(slices.Clone(writes.made), func(w string) bool {
		return !strings.Contains(w, "acctaa") && !strings.Contains(w, "acctbb")
	})
	if len(ours) != 4 {
		t.Errorf("two tenants' accounts took %d writes, want 4 (a key and a credentials Secret each): %q; refused: %q", len(ours), ours, writes.refused)
	} else if len(writes.refused) > 0 {
		t.Logf("writes refused, and made again: %q", writes.refused)
	}
	writes.mu.Unlock()
	if !strings.HasPrefix(ga.Status.NATSAccount, "A") || ga.Status.NATSAccount == gb.Status.NATSAccount {
		t.Fatalf("accounts %q and %q: want one each", ga.Status.NATSAccount, gb.Status.NATSAccount)
	}
	ctx := context.Background()
	nc, err := dialCreds(n.URL, tenantCreds(t, "ACCTAA"))
	if err != nil {
		t.Fatalf("ACCTAA's workloads connect: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var names []string
	for name := range js.StreamNames(ctx).Name() {
		names = append(names, name)
	}
	if fmt.Sprint(names) != fmt.Sprint([]string{tenant.CommandsStream("ACCTAA"), tenant.EventsStream("ACCTAA")}) &&
		fmt.Sprint(names) != fmt.Sprint([]string{tenant.EventsStream("ACCTAA"), tenant.CommandsStream("ACCTAA")}) {
		t.Errorf("ACCTAA's credentials see the streams %v, want its own two only", names)
	}

	if err := k8s.Delete(ctx, getTenant(t, a)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*waitFor, "ACCTAA gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(a), &evav1.EvaTenant{}); !apierrors.IsNotFound(err) {
			return errNot("deleted")
		}
		return nil
	})
	deadline := time.Now().Add(5 * time.Second)
	for nc.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if nc.IsConnected() {
		t.Error("the decommissioned tenant's connection is still up")
	}
	if again, err := dialCreds(n.URL, tenantCreds(t, "ACCTBB")); err != nil {
		t.Errorf("ACCTBB's credentials after ACCTAA's decommission: %v", err)
	} else {
		again.Close()
	}
	var key corev1.Secret
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: claimsNamespace, Name: accountKeySecret("ACCTAA")}, &key); !apierrors.IsNotFound(err) {
		t.Errorf("the decommissioned tenant's account key: %v", err)
	}
}

// TestMissingNATSSigningKeyIsSaid: without the platform's signing key the tenant does
// not fall back to a shared account: Provisioned says what is missing.
func TestMissingNATSSigningKeyIsSaid(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	startAccountsOperator(t, n, "absent-signer", "absent-system")
	tn := newTenant(newTestNamespace(t), "ACCTNO", evav1.TierStarter)
	createTenant(t, tn)
	eventually(t, waitFor, "Provisioned names the missing Secret", func() error {
		c := condition(getTenant(t, tn), evav1.ConditionProvisioned)
		if c.Reason != status.ReasonMessagingDown || !strings.Contains(c.Message, "eva-system/absent-signer is missing") {
			return fmt.Errorf("Provisioned %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

// TestRotatingTenantCredentials: a new value of the tenant's
// eva.aidonow.com/rotate-nats-credentials rotates its workloads' credentials: the
// operator writes a new user's and revokes the old user in the account's JWT, and a
// durable consumer read by the new user loses no message.
func TestRotatingTenantCredentials(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "rotation")
	startAccountsOperator(t, n, signer, system)
	startStandIn(t)
	tn := newTenant(newTestNamespace(t), "ROTATE", evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseActive)
	ctx := context.Background()
	first := tenantCreds(t, "ROTATE")
	nc, err := dialCreds(n.URL, first)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, tenant.EventsStream("ROTATE"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "crm", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "capsule.ROTATE.events.order", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()

	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace("ROTATE"), Name: tenant.NATSCredsSecret("ROTATE")}}
	rotate := getTenant(t, tn)
	rotate.Annotations = map[string]string{tenant.AnnotationRotateNATSCredentials: "2026-12-02"}
	if err := k8s.Update(ctx, rotate); err != nil {
		t.Fatal(err)
	}
	var second []byte
	eventually(t, waitFor, "new credentials written", func() error {
		var s corev1.Secret
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(creds), &s); err != nil {
			return err
		}
		if second = s.Data[tenant.NATSCredsKey]; string(second) == string(first) {
			return errNot("rotated")
		}
		return nil
	})
	eventually(t, waitFor, "the old user refused", func() error {
		old, err := dialCreds(n.URL, first)
		if err == nil {
			old.Close()
			return errNot("refused")
		}
		return nil
	})
	fresh, err := dialCreds(n.URL, second)
	if err != nil {
		t.Fatalf("the new credentials: %v", err)
	}
	defer fresh.Close()
	fjs, _ := jetstream.New(fresh)
	c, err := fjs.Consumer(ctx, tenant.EventsStream("ROTATE"), "crm")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		_ = m.Ack()
	}
	if got != 3 {
		t.Errorf("the consumer read %d of 3 messages after the rotation", got)
	}
}

// TestNACKMakesTheStreamsInTheTenantsAccount: in NACK mode, an environment with
// natsAccounts renders each tenant's NACK Account (its credentials' Secret) and Streams
// naming it; the operator mints the account and writes the credentials, and NACK (the
// stand-in, connecting as the Account says) makes the streams there: the tenant's
// credentials see its two streams, its releases mount them, and NACK's own server holds
// none. Decommissioned, the account is closed once the namespace is gone.
func TestNACKMakesTheStreamsInTheTenantsAccount(t *testing.T) {
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "nack-accounts")
	startAccountsOperator(t, n, signer, system, true)
	shared := standInJetStream(t)
	startStandIn(t, withJetStream(shared), withNATSAccounts(n.URL))
	tn := newTenant(newTestNamespace(t), "NACKAC", evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseActive)
	ctx := context.Background()
	ns := tenant.Namespace("NACKAC")
	var account nackv1beta2.Account
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: tenant.NATSAccountObject}, &account); err != nil {
		t.Fatalf("the tenant's NACK Account: %v", err)
	}
	if c := account.Spec.Creds; c == nil || c.Secret == nil || c.Secret.Name != tenant.NATSCredsSecret("NACKAC") || len(account.Spec.Servers) != 0 {
		t.Errorf("NACK Account spec %+v, want the credentials Secret on NACK's servers", account.Spec)
	}
	var hr helmv2.HelmRelease
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "crm"}, &hr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hr.Spec.Values.Raw), `"secretName":"`+tenant.NATSCredsSecret("NACKAC")+`"`) {
		t.Errorf("crm's values mount no NATS credentials: %s", hr.Spec.Values.Raw)
	}
	creds := tenantCreds(t, "NACKAC")
	nc, err := dialCreds(n.URL, creds)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var names []string
	for name := range js.StreamNames(ctx).Name() {
		names = append(names, name)
	}
	if len(names) != 2 {
		t.Errorf("the tenant's account holds the streams %v, want its two", names)
	}
	for _, stream := range []string{tenant.EventsStream("NACKAC"), tenant.CommandsStream("NACKAC")} {
		if found, err := shared.Exists(ctx, stream); err != nil || found {
			t.Errorf("NACK's own server holds %s: %v %v", stream, found, err)
		}
	}

	if err := k8s.Delete(ctx, getTenant(t, tn)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*waitFor, "the decommissioned tenant's credentials refused", func() error {
		if again, err := dialCreds(n.URL, creds); err == nil {
			again.Close()
			return errNot("refused")
		}
		return nil
	})
}

// TestSharedStreamsMoveIntoTheTenantsAccount: a tenant whose streams lived in the shared
// account (an operator before natsAccounts made them there) has what they hold moved into
// its own account (MoveFrom, --nats-move-shared-streams), every message once and in
// order, and the shared streams deleted: its workloads' credentials read the messages.
func TestSharedStreamsMoveIntoTheTenantsAccount(t *testing.T) {
	ctx := context.Background()
	n := testenv.StartNATSOperator(t, t.TempDir())
	signer, system := platformNATSSecrets(t, n, "move-shared")
	sharedServer := testenv.StartNATS(t, -1, t.TempDir())
	shared, err := messaging.Connect(messaging.Config{URL: sharedServer.ClientURL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shared.Close)
	const code = "MOVEDD"
	for _, spec := range messaging.TenantStreams(code, tenant.DefaultCatalog().Tiers[evav1.TierStarter].Streams) {
		if _, err := shared.Ensure(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := nats.Connect(sharedServer.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sjs, _ := jetstream.New(nc)
	for i, subject := range []string{"capsule.MOVEDD.events.a", "capsule.MOVEDD.events.b", "capsule.MOVEDD.commands.c", "capsule.MOVEDD.events.d"} {
		if _, err := sjs.Publish(ctx, subject, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	startOperatorWith(t, "", func(r *EvaTenantReconciler, mgr ctrl.Manager) {
		r.Renderer.Env.Settings.NATSAccounts = true
		r.Accounts = &Accounts{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: claimsNamespace,
			SignerSecret: signer, SystemSecret: system, Config: messaging.Config{URL: n.URL, Timeout: 2 * time.Second}}
		r.DirectAccounts, r.MoveFrom = true, shared
	})
	startStandIn(t)
	tn := newTenant(newTestNamespace(t), code, evav1.TierStarter)
	createTenant(t, tn)
	waitPhase(t, tn, evav1.PhaseActive)
	own, err := dialCreds(n.URL, tenantCreds(t, code))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	ojs, _ := jetstream.New(own)
	eventually(t, waitFor, "the shared streams moved and deleted", func() error {
		for _, name := range []string{tenant.EventsStream(code), tenant.CommandsStream(code)} {
			if found, err := shared.Exists(ctx, name); err != nil || found {
				return fmt.Errorf("%s still in the shared account (%v)", name, err)
			}
		}
		return nil
	})
	for stream, want := range map[string][]string{
		tenant.EventsStream(code):   {"capsule.MOVEDD.events.a", "capsule.MOVEDD.events.b", "capsule.MOVEDD.events.d"},
		tenant.CommandsStream(code): {"capsule.MOVEDD.commands.c"},
	} {
		st, err := ojs.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for seq := uint64(1); ; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				break
			}
			got = append(got, m.Subject)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s in the tenant's account holds %v, want %v", stream, got, want)
		}
	}
}
