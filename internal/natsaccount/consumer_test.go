package natsaccount_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/natsaccount"
)

// TestConsumerImportsTenantEvents: the environment's one crossing, on a real server in
// operator mode. The platform's consumer account receives every tenant's events and
// nothing else; no other account can import them, with no token or with the
// consumer's; the export signer's users can do nothing; and a tenant the consumer no
// longer imports (decommissioned) reaches it no more. Seen failing with the exports
// made public (TokenReq false): the stranger's import received GLOBEX's events.
func TestConsumerImportsTenantEvents(t *testing.T) {
	f := newFleet(t)
	consumer, err := natsaccount.NewConsumer(f.nats.OperatorSigner, []string{"events.>"})
	if err != nil {
		t.Fatal(err)
	}
	f.consumer = consumer
	f.push("ACMECO", f.limits, nil)
	f.push("GLOBEX", f.limits, nil)
	tenants := []natsaccount.ImportedTenant{{Code: "ACMECO", Account: f.pub("ACMECO")}, {Code: "GLOBEX", Account: f.pub("GLOBEX")}}
	f.pushClaims(consumer.Claims(tenants))
	platform := f.dialKey(consumer.Key)
	events := f.subscribe(platform, "capsule.*.events.>")
	commands := f.subscribe(platform, "capsule.*.commands.>")
	acme, _ := f.connect("ACMECO")
	globex, _ := f.connect("GLOBEX")
	spy := f.subscribe(acme, "capsule.GLOBEX.events.>")
	acmeCommands := f.subscribe(acme, "capsule.ACMECO.commands.>")

	// A stranger the platform signs imports GLOBEX's export: without a token, and with
	// the token made for the consumer.
	stranger, _ := nkeys.CreateAccount()
	strangerPub, _ := stranger.PublicKey()
	consumerClaims, err := consumer.Claims(tenants[1:])
	if err != nil {
		t.Fatal(err)
	}
	sc := jwt.NewAccountClaims(strangerPub)
	sc.Name = "stranger"
	sc.Imports.Add(&jwt.Import{Name: "bare", Subject: "capsule.GLOBEX.events.>", Account: f.pub("GLOBEX"), Type: jwt.Stream})
	f.pushClaims(sc, nil)
	stolen := f.subscribe(f.dialKey(stranger), ">")
	thief, _ := nkeys.CreateAccount()
	thiefPub, _ := thief.PublicKey()
	tc := jwt.NewAccountClaims(thiefPub)
	tc.Name = "thief"
	tc.Imports.Add(&jwt.Import{Name: "stolen", Subject: "capsule.GLOBEX.events.>", Account: f.pub("GLOBEX"), Type: jwt.Stream,
		Token: consumerClaims.Imports[0].Token})
	token, err := tc.Encode(f.nats.OperatorSigner) // unchecked, as a forger would
	if err != nil {
		t.Fatal(err)
	}
	if err := f.resolver.Push(context.Background(), token); err == nil {
		t.Error("the resolver took an account importing with the consumer's token")
	}

	// The export signer's user, on ACMECO's behalf.
	// Seen failing with the scope left open: it read ACMECO's events and sent it a command.
	if signerUser, err := f.userOf(consumer.ExportSigner, f.pub("ACMECO")); err == nil {
		if err := signerUser.Publish("capsule.ACMECO.commands.pay", []byte("forged")); err == nil {
			_ = signerUser.Flush()
		}
		if sub, err := signerUser.SubscribeSync(">"); err == nil {
			_ = signerUser.Flush()
			_ = globex.Publish("capsule.ACMECO.events.none", nil)
			_ = acme.Publish("capsule.ACMECO.events.private", []byte("acme"))
			_ = acme.Flush()
			if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
				t.Errorf("the export signer's user read %s", m.Subject)
			}
		}
	}

	publish(t, acme, "capsule.ACMECO.events.order", "capsule.ACMECO.commands.run")
	publish(t, globex, "capsule.GLOBEX.events.paid")
	publish(t, platform, "capsule.ACMECO.commands.pay")
	got := drain(events)
	if !got["capsule.ACMECO.events.order"] || !got["capsule.GLOBEX.events.paid"] {
		t.Errorf("the consumer received %v, not both tenants' events", got)
	}
	if leaked := drain(commands); leaked["capsule.ACMECO.commands.run"] {
		t.Errorf("the consumer received ACMECO's commands: %v", leaked)
	}
	if leaked := drain(acmeCommands); leaked["capsule.ACMECO.commands.pay"] {
		t.Errorf("ACMECO received a command published by the consumer or the export signer's user: %v", leaked)
	}
	for name, sub := range map[string]*nats.Subscription{"ACMECO spying on GLOBEX": spy, "the stranger": stolen} {
		if leaked := drain(sub); len(leaked) > 0 {
			t.Errorf("%s received %v", name, leaked)
		}
	}

	// GLOBEX decommissioned: the consumer imports ACMECO's alone.
	f.pushClaims(consumer.Claims(tenants[:1]))
	publish(t, globex, "capsule.GLOBEX.events.after")
	publish(t, acme, "capsule.ACMECO.events.after")
	got = drain(events)
	if got["capsule.GLOBEX.events.after"] || !got["capsule.ACMECO.events.after"] {
		t.Errorf("after GLOBEX's import went, the consumer received %v", got)
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

// userOf connects as a user a signing key of account issued.
func (f *fleet) userOf(signer nkeys.KeyPair, account string) (*nats.Conn, error) {
	user, _ := nkeys.CreateUser()
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.IssuerAccount = account
	uc.UserPermissionLimits = jwt.UserPermissionLimits{} // a scoped key's users carry none of their own
	token, err := uc.Encode(signer)
	if err != nil {
		return nil, err
	}
	seed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, err
	}
	nc, err := f.dial(creds)
	if err == nil {
		f.t.Cleanup(nc.Close)
	}
	return nc, err
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
