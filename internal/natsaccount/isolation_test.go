package natsaccount_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// fleet is an operator-mode server with tenants' accounts pushed to its resolver.
type fleet struct {
	t        *testing.T
	nats     *testenv.OperatorNATS
	resolver *natsaccount.Resolver
	limits   natsaccount.Limits
	keys     map[string]nkeys.KeyPair
	// consumer, when set, is what every tenant's account sends its events to.
	consumer *natsaccount.Consumer
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	n := testenv.StartNATSOperator(t, t.TempDir())
	sys, err := nats.Connect(n.URL, nats.UserCredentials(n.SystemCreds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	catalog := tenant.DefaultCatalog()
	return &fleet{t: t, nats: n, resolver: &natsaccount.Resolver{Conn: sys},
		limits: natsaccount.LimitsOf(catalog.Tiers["Starter"]), keys: map[string]nkeys.KeyPair{}}
}

// push mints and pushes the tenant's account, with the revocations given.
func (f *fleet) push(code string, l natsaccount.Limits, revoked map[string]time.Time) {
	f.t.Helper()
	key, ok := f.keys[code]
	if !ok {
		var err error
		if key, err = nkeys.CreateAccount(); err != nil {
			f.t.Fatal(err)
		}
		f.keys[code] = key
	}
	pub, _ := key.PublicKey()
	ac, err := natsaccount.Claims(code, pub, l, revoked)
	if err == nil && f.consumer != nil {
		err = f.consumer.Import(ac, code, l)
	}
	f.pushClaims(ac, err)
}

// connect issues a user of the tenant's account and connects as it.
func (f *fleet) connect(code string) (*nats.Conn, string) {
	f.t.Helper()
	creds, pub, err := natsaccount.User(code, "workload", f.keys[code], time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	nc, err := f.dial(creds)
	if err != nil {
		f.t.Fatalf("%s connects with its own credentials: %v", code, err)
	}
	f.t.Cleanup(nc.Close)
	return nc, pub
}

func (f *fleet) dial(creds []byte) (*nats.Conn, error) {
	user, err := natsaccount.CredsOption(creds)
	if err != nil {
		return nil, err
	}
	return nats.Connect(f.nats.URL, user, nats.MaxReconnects(0))
}

// streamOf creates the tenant's events stream as Eva does (its subjects, the tier's
// size).
func streamOf(t *testing.T, js jetstream.JetStream, code string, maxBytes int64) jetstream.Stream {
	t.Helper()
	s, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: tenant.EventsStream(code),
		Subjects: []string{tenant.EventsSubject(code)}, MaxBytes: maxBytes})
	if err != nil {
		t.Fatalf("%s creates its events stream: %v", code, err)
	}
	return s
}

// TestTenantAccountsIsolate: the attack of the issue, from ACMECO's workload against
// GLOBEX, on a real server in operator mode: every step fails or sees nothing. The same
// attack between two users of one shared account (what every tenant had before) leaks
// at every step: the test's own proof that it can fail.
func TestTenantAccountsIsolate(t *testing.T) {
	f := newFleet(t)
	f.push("ACMECO", f.limits, nil)
	f.push("GLOBEX", f.limits, nil)
	acme, _ := f.connect("ACMECO")
	globex, _ := f.connect("GLOBEX")
	for _, leak := range attack(t, acme, globex, f.limits) {
		t.Errorf("with an account each: %s", leak)
	}

	shared := newFleet(t)
	shared.push("SHARED", shared.limits, nil)
	one, _ := shared.connect("SHARED")
	other, _ := shared.connect("SHARED")
	if leaks := attack(t, one, other, shared.limits); len(leaks) < 4 {
		t.Errorf("in one shared account the attack found only %v", leaks)
	}
}

// attack runs, from acme's connection, the attack on globex's, and lists what
// leaked.
func attack(t *testing.T, acme, globex *nats.Conn, l natsaccount.Limits) []string {
	t.Helper()
	ctx := context.Background()
	var leaks []string
	spy, err := acme.SubscribeSync("capsule.GLOBEX.events.>")
	if err != nil {
		t.Fatal(err)
	}
	commands, err := globex.SubscribeSync("capsule.GLOBEX.commands.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = acme.Flush()
	_ = globex.Flush()
	if err := globex.Publish("capsule.GLOBEX.events.private", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if err := acme.Publish("capsule.GLOBEX.commands.pay", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	_ = acme.Flush()
	_ = globex.Flush()
	if m, err := spy.NextMsg(300 * time.Millisecond); err == nil {
		leaks = append(leaks, fmt.Sprintf("ACMECO read GLOBEX's event %q", m.Data))
	}
	if m, err := commands.NextMsg(300 * time.Millisecond); err == nil {
		leaks = append(leaks, fmt.Sprintf("GLOBEX received ACMECO's forged command %q", m.Data))
	}
	_ = spy.Unsubscribe()
	_ = commands.Unsubscribe()

	gjs, _ := jetstream.New(globex)
	ajs, _ := jetstream.New(acme)
	streamOf(t, gjs, "GLOBEX", l.StreamMaxBytes)
	for i := range 5 {
		if _, err := gjs.Publish(ctx, "capsule.GLOBEX.events.order", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	names := ajs.StreamNames(ctx)
	for name := range names.Name() {
		leaks = append(leaks, "ACMECO lists the stream "+name)
	}
	if _, err := ajs.Stream(ctx, tenant.EventsStream("GLOBEX")); err == nil {
		leaks = append(leaks, "ACMECO reads GLOBEX's stream")
	}
	if siphon, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: tenant.EventsStream("ACMECO"), MaxBytes: l.StreamMaxBytes,
		Sources: []*jetstream.StreamSource{{Name: tenant.EventsStream("GLOBEX")}}}); err == nil {
		time.Sleep(500 * time.Millisecond)
		if info, err := siphon.Info(ctx); err == nil && info.State.Msgs > 0 {
			leaks = append(leaks, fmt.Sprintf("ACMECO's stream sourcing GLOBEX's holds %d of its messages", info.State.Msgs))
		}
	}
	if err := ajs.DeleteStream(ctx, tenant.EventsStream("GLOBEX")); err == nil {
		leaks = append(leaks, "ACMECO deleted GLOBEX's stream")
	}
	if _, err := gjs.Stream(ctx, tenant.EventsStream("GLOBEX")); !errors.Is(err, jetstream.ErrStreamNotFound) && err != nil {
		t.Fatalf("GLOBEX reads its stream: %v", err)
	}
	return leaks
}

// TestTenantAccountLimits: the server holds each account to its tier: two streams of
// the tier's size, each declaring its size, no more.
func TestTenantAccountLimits(t *testing.T) {
	f := newFleet(t)
	f.push("ACMECO", f.limits, nil)
	acme, _ := f.connect("ACMECO")
	js, _ := jetstream.New(acme)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "unsized", Subjects: []string{"capsule.ACMECO.x.>"}}); err == nil {
		t.Error("a stream that declares no size was created")
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "huge", Subjects: []string{"capsule.ACMECO.x.>"},
		MaxBytes: 2 * f.limits.StreamMaxBytes}); err == nil {
		t.Error("a stream larger than the tier's was created")
	}
	streamOf(t, js, "ACMECO", f.limits.StreamMaxBytes)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: tenant.CommandsStream("ACMECO"),
		Subjects: []string{tenant.CommandsSubject("ACMECO")}, MaxBytes: f.limits.StreamMaxBytes}); err != nil {
		t.Fatalf("the second of Eva's streams: %v", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "third", Subjects: []string{"capsule.ACMECO.x.>"}, MaxBytes: 1024}); err == nil {
		t.Error("a third stream was created")
	}
	if err := acme.Publish("capsule.ACMECO.events.big", make([]byte, f.limits.Payload+1)); err == nil {
		if err := acme.Flush(); err == nil && acme.IsConnected() {
			t.Error("a message over the tier's payload was published")
		}
	}
}

// TestRevokedCredentialsAreRefused: a decommission pushes the account closed with every
// user revoked: the connection of the old credentials is cut and they cannot connect
// again. A rotation revokes one user: a durable consumer read by the new user loses no
// message.
func TestRevokedCredentialsAreRefused(t *testing.T) {
	f := newFleet(t)
	f.push("ACMECO", f.limits, nil)
	ctx := context.Background()
	oldCreds, oldPub, err := natsaccount.User("ACMECO", "workload", f.keys["ACMECO"], time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	old, err := f.dial(oldCreds)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	js, _ := jetstream.New(old)
	s := streamOf(t, js, "ACMECO", f.limits.StreamMaxBytes)
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "crm", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "capsule.ACMECO.events.order", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}

	// Rotation: the old user revoked, a new one issued after.
	f.push("ACMECO", f.limits, map[string]time.Time{oldPub: time.Now()})
	if _, err := f.dial(oldCreds); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("the rotated-out credentials connect again: %v", err)
	}
	fresh, _ := f.connect("ACMECO")
	fjs, _ := jetstream.New(fresh)
	c, err := fjs.Consumer(ctx, tenant.EventsStream("ACMECO"), "crm")
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

	// Decommission: every user revoked, the account closed.
	f.push("ACMECO", natsaccount.Closed, map[string]time.Time{jwt.All: time.Now()})
	deadline := time.Now().Add(5 * time.Second)
	for fresh.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if fresh.IsConnected() {
		t.Error("a connection of the decommissioned tenant is still up")
	}
	if _, err := f.dial(oldCreds); err == nil {
		t.Error("the decommissioned tenant's credentials connect")
	}
}

// TestUntrustedAccountIsUnusable: the full resolver stores any well-formed account JWT
// (it answers "jwt updated" to one signed by a key its operator does not trust) and
// checks the signer when the account is used: a user of such an account is refused.
// So Eva checks an account by connecting as its user (Check), not by the push's answer.
func TestUntrustedAccountIsUnusable(t *testing.T) {
	f := newFleet(t)
	stranger, _ := nkeys.CreateOperator()
	key, _ := nkeys.CreateAccount()
	pub, _ := key.PublicKey()
	ac, err := natsaccount.Claims("ACMECO", pub, f.limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := natsaccount.Sign(ac, stranger)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.resolver.Push(context.Background(), token); err != nil {
		t.Fatalf("push: %v", err)
	}
	creds, _, err := natsaccount.User("ACMECO", "workload", key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := f.dial(creds); err == nil {
		nc.Close()
		t.Fatal("a user of an account signed by an untrusted key connected")
	}
}
