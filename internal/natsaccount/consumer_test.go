package natsaccount_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
)

// TestConsumerReceivesTenantEvents: the environment's one crossing, on a real server in
// operator mode. The platform's consumer account receives every tenant's events, and
// nothing else, while the tenants' own subscribers and streams keep theirs; a forger
// account the platform signs sends nothing into it, with no token or with a tenant's;
// the consumer sends nothing into a tenant; a closed tenant's events reach it no more.
// Seen failing with the consumer's service open (TokenReq false): the forger's event
// in GLOBEX's name reached the consumer.
func TestConsumerReceivesTenantEvents(t *testing.T) {
	f := newFleet(t)
	consumer, err := natsaccount.NewConsumer(f.nats.OperatorSigner, []string{"events.>"})
	if err != nil {
		t.Fatal(err)
	}
	f.pushClaims(consumer.Claims(time.Time{}))
	f.consumer = consumer
	f.push("ACMECO", f.limits, nil)
	f.push("GLOBEX", f.limits, nil)
	platform := f.dialKey(consumer.Key)
	events := f.subscribe(platform, "capsule.*.events.>")
	commands := f.subscribe(platform, "capsule.*.commands.>")
	acme, _ := f.connect("ACMECO")
	globex, _ := f.connect("GLOBEX")
	spy := f.subscribe(acme, "capsule.GLOBEX.events.>")
	acmeEvents := f.subscribe(acme, "capsule.ACMECO.events.>")
	acmeCommands := f.subscribe(acme, "capsule.ACMECO.commands.>")
	js, _ := jetstream.New(acme)
	stream := streamOf(t, js, "ACMECO", f.limits.StreamMaxBytes)

	// A forger the platform signs sends events in GLOBEX's name: importing the service
	// without a token, and with ACMECO's (the resolver refuses that one).
	forger, _ := nkeys.CreateAccount()
	forgerPub, _ := forger.PublicKey()
	consumerPub, _ := consumer.Key.PublicKey()
	fc := jwt.NewAccountClaims(forgerPub)
	fc.Name = "forger"
	fc.Imports.Add(&jwt.Import{Name: "bare", Subject: "capsule.GLOBEX.events.>", Account: consumerPub, Type: jwt.Service})
	f.pushClaims(fc, nil)
	forged := f.dialKey(forger)
	acmeClaims, err := natsaccount.Claims("ACMECO", f.pub("ACMECO"), f.limits, nil)
	if err == nil {
		err = consumer.Import(acmeClaims, "ACMECO", f.limits)
	}
	if err != nil {
		t.Fatal(err)
	}
	thief, _ := nkeys.CreateAccount()
	thiefPub, _ := thief.PublicKey()
	tc := jwt.NewAccountClaims(thiefPub)
	tc.Name = "thief"
	tc.Imports.Add(&jwt.Import{Name: "stolen", Subject: "capsule.ACMECO.events.>", Account: consumerPub, Type: jwt.Service,
		Token: acmeClaims.Imports[0].Token})
	token, err := tc.Encode(f.nats.OperatorSigner) // unchecked, as a forger would
	if err != nil {
		t.Fatal(err)
	}
	if err := f.resolver.Push(context.Background(), token); err == nil {
		t.Error("the resolver took an account importing with ACMECO's token")
	}

	publish(t, acme, "capsule.ACMECO.events.order", "capsule.ACMECO.commands.run")
	if _, err := js.Publish(context.Background(), "capsule.ACMECO.events.stored", nil); err != nil {
		t.Errorf("ACMECO's stream takes its event: %v", err)
	}
	publish(t, globex, "capsule.GLOBEX.events.paid")
	publish(t, forged, "capsule.GLOBEX.events.forged")
	publish(t, platform, "capsule.ACMECO.commands.pay", "capsule.ACMECO.events.fake")
	got := drain(events)
	if !got["capsule.ACMECO.events.order"] || !got["capsule.ACMECO.events.stored"] || !got["capsule.GLOBEX.events.paid"] {
		t.Errorf("the consumer received %v, not both tenants' events", got)
	}
	if got["capsule.GLOBEX.events.forged"] {
		t.Error("the forger's event in GLOBEX's name reached the consumer")
	}
	if leaked := drain(commands); leaked["capsule.ACMECO.commands.run"] {
		t.Errorf("the consumer received ACMECO's commands: %v", leaked)
	}
	if own := drain(acmeEvents); !own["capsule.ACMECO.events.order"] || own["capsule.ACMECO.events.fake"] {
		t.Errorf("ACMECO's own subscriber received %v: want its events, none of the consumer's", own)
	}
	if info, err := stream.Info(context.Background()); err != nil || info.State.Msgs != 2 {
		t.Errorf("ACMECO's stream: %v, %v: want its 2 events", info, err)
	}
	if leaked := drain(acmeCommands); leaked["capsule.ACMECO.commands.pay"] {
		t.Errorf("ACMECO received a command the consumer published: %v", leaked)
	}
	if leaked := drain(spy); len(leaked) > 0 {
		t.Errorf("ACMECO spying on GLOBEX received %v", leaked)
	}

	// GLOBEX decommissioned: its account closed and importing nothing, nothing of it
	// reaches the consumer, even what it publishes while the server closes its
	// connection (CI saw that one through when the closed account still imported).
	closed, err := natsaccount.Claims("GLOBEX", f.pub("GLOBEX"), natsaccount.Closed, nil)
	if err == nil {
		err = consumer.Import(closed, "GLOBEX", natsaccount.Closed)
	}
	if err != nil || len(closed.Imports) > 0 {
		t.Errorf("GLOBEX's closed account imports %v (%v): want nothing", closed.Imports, err)
	}
	f.push("GLOBEX", natsaccount.Closed, map[string]time.Time{jwt.All: time.Now()})
	_ = globex.Publish("capsule.GLOBEX.events.after", nil)
	publish(t, acme, "capsule.ACMECO.events.after")
	got = drain(events)
	if got["capsule.GLOBEX.events.after"] || !got["capsule.ACMECO.events.after"] {
		t.Errorf("after GLOBEX's close, the consumer received %v", got)
	}
}

func (f *fleet) pub(code string) string {
	pub, _ := f.keys[code].PublicKey()
	return pub
}

func (f *fleet) pushClaims(ac *jwt.AccountClaims, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
	token, err := natsaccount.Sign(ac, f.nats.OperatorSigner)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.resolver.Push(context.Background(), token); err != nil {
		f.t.Fatal(err)
	}
}

// dialKey connects as a new user of the account key.
func (f *fleet) dialKey(key nkeys.KeyPair) *nats.Conn {
	f.t.Helper()
	creds, _, err := natsaccount.User("test", "user", key, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	nc, err := f.dial(creds)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	return nc
}

func (f *fleet) subscribe(nc *nats.Conn, subject string) *nats.Subscription {
	f.t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
	return sub
}

func publish(t *testing.T, nc *nats.Conn, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		if err := nc.Publish(s, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// drain is the subjects a subscription received within a moment.
func drain(sub *nats.Subscription) map[string]bool {
	got := map[string]bool{}
	for {
		m, err := sub.NextMsg(300 * time.Millisecond)
		if err != nil {
			return got
		}
		got[m.Subject] = true
	}
}

// TestConsumerHoldsNoResponses: every message a tenant sends the consumer with a reply
// subject (each JetStream publish, awaiting its stream's ack) makes the server keep a
// response route in the consumer's account until it is answered, which the consumer
// never does. The export's response threshold bounds how long: a burst of JetStream
// publishes leaves no route behind a few seconds later. Seen failing with the server's
// default threshold (2 minutes): 200 routes still held.
func TestConsumerHoldsNoResponses(t *testing.T) {
	f := newFleet(t)
	consumer, err := natsaccount.NewConsumer(f.nats.OperatorSigner, []string{"events.>"})
	if err != nil {
		t.Fatal(err)
	}
	f.pushClaims(consumer.Claims(time.Time{}))
	f.consumer = consumer
	f.push("ACMECO", f.limits, nil)
	platform := f.dialKey(consumer.Key)
	events := f.subscribe(platform, "capsule.*.events.>")
	acme, _ := f.connect("ACMECO")
	js, _ := jetstream.New(acme)
	streamOf(t, js, "ACMECO", f.limits.StreamMaxBytes)
	ctx := context.Background()
	for i := range 200 {
		if _, err := js.Publish(ctx, "capsule.ACMECO.events.order", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(drain(events)); got == 0 {
		t.Fatal("the consumer received none of the events")
	}
	pub, _ := consumer.Key.PublicKey()
	acc, err := f.nats.Server.LookupAccount(pub)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for acc.NumPendingAllResponses() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := acc.NumPendingAllResponses(); n > 0 {
		t.Errorf("the consumer's account holds %d response routes of tenants' publishes", n)
	}
}

// TestConsumerSubjectsThatOverlapAreRefused: NATS refuses the JWTs of subjects that
// overlap, which SubjectsOverlap (the environment's check) says beforehand; subjects
// that do not overlap sign.
func TestConsumerSubjectsThatOverlapAreRefused(t *testing.T) {
	signer, _ := nkeys.CreateOperator()
	tenantKey, _ := nkeys.CreateAccount()
	tenantPub, _ := tenantKey.PublicKey()
	for subjects, overlap := range map[[2]string]bool{
		{"events.orders.*", "events.payments.>"}: false,
		{"events.>", "events.orders.*"}:          true,
		{"events.a", "events.a"}:                 true,
	} {
		if got := natsaccount.SubjectsOverlap(subjects[0], subjects[1]); got != overlap {
			t.Errorf("SubjectsOverlap(%q, %q) = %v", subjects[0], subjects[1], got)
		}
		consumer, err := natsaccount.NewConsumer(signer, subjects[:])
		if err != nil {
			t.Fatal(err)
		}
		ac, err := consumer.Claims(time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		_, consumerErr := natsaccount.Sign(ac, signer)
		open := natsaccount.LimitsOf(tenant.DefaultCatalog().Tiers["Starter"])
		tc, err := natsaccount.Claims("ACMECO", tenantPub, open, nil)
		if err == nil {
			err = consumer.Import(tc, "ACMECO", open)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, tenantErr := natsaccount.Sign(tc, signer)
		if refused := consumerErr != nil || tenantErr != nil; refused != overlap {
			t.Errorf("%q: the consumer's JWT %v, the tenant's %v; want refused: %v", subjects, consumerErr, tenantErr, overlap)
		}
	}
}

// TestConsumerRevokesEarlierUsers: the consumer's account revokes every user issued
// before the credentials the platform holds, so credentials written again (the Secret
// deleted, the operator restarted) shut out the ones before them: a leaked copy reads
// no tenant's events. Seen failing with no revocation: the old user still connected.
func TestConsumerRevokesEarlierUsers(t *testing.T) {
	f := newFleet(t)
	consumer, err := natsaccount.NewConsumer(f.nats.OperatorSigner, []string{"events.>"})
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := natsaccount.User(natsaccount.ConsumerName, "platform-consumer", consumer.Key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issued, _ := natsaccount.IssuedAt(old)
	f.pushClaims(consumer.Claims(issued))
	kept, err := f.dial(old)
	if err != nil {
		t.Fatalf("the consumer's credentials connect: %v", err)
	}
	defer kept.Close()
	time.Sleep(1100 * time.Millisecond) // a JWT's issue time is in seconds
	fresh, _, err := natsaccount.User(natsaccount.ConsumerName, "platform-consumer", consumer.Key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issued, _ = natsaccount.IssuedAt(fresh)
	f.pushClaims(consumer.Claims(issued))
	if nc, err := f.dial(old); err == nil {
		nc.Close()
		t.Error("the consumer's earlier credentials connect after new ones were issued")
	}
	deadline := time.Now().Add(5 * time.Second)
	for kept.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if kept.IsConnected() {
		t.Error("a connection of the earlier credentials is still up")
	}
	if nc, err := f.dial(fresh); err != nil {
		t.Errorf("the new credentials: %v", err)
	} else {
		nc.Close()
	}
}
