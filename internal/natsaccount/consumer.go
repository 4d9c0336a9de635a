package natsaccount

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/tenant"
)

// ConsumerName is the name of the platform's consumer account, beside its public key.
const ConsumerName = "eva-consumer"

// ResponseThreshold is how long the server keeps the route back to a tenant's message
// that carries a reply subject (every JetStream publish does, awaiting its stream's
// ack). The consumer is not meant to answer, and the server's default (two minutes)
// kept a route per event in the consumer's account: a tenant publishing fast filled the
// shared server's memory.
const ResponseThreshold = time.Second

// Consumer is the one crossing between accounts an environment may declare
// (natsConsumer in its environment.yaml): an account of the platform's consumer of
// tenant events, to which every tenant's account sends the subjects named, under its
// own capsule.<CODE>. The consumer's account exports them as a service that needs an
// activation token (capsule.*.<subject>), and each tenant's account imports its own
// subjects alone, with a token the consumer's key issued for that account. A tenant's
// events still reach its own subscribers and streams; a copy reaches the consumer.
// Nothing flows the other way: the consumer can answer a tenant's request (a reply
// subject), and publish nothing into a tenant's account. Both JWTs stay the same size
// however many tenants there are.
//
// The consumer's key is derived from the NATS operator signing key the platform gives
// Eva (the one secret Eva needs for every account it signs): nothing more is stored, a
// new signing key makes a new consumer account, and every operator of the environment
// derives the same one.
type Consumer struct {
	// Subjects are relative to a tenant's capsule.<CODE>. ("events.>").
	Subjects []string
	// Key is the consumer account's key: it signs the consumer's users and the
	// activation tokens.
	Key nkeys.KeyPair
}

// NewConsumer derives the consumer's key from the operator signing key.
func NewConsumer(operatorSigner nkeys.KeyPair, subjects []string) (*Consumer, error) {
	key, err := derivedAccountKey(operatorSigner, "eva nats consumer account")
	if err != nil {
		return nil, err
	}
	return &Consumer{Subjects: slices.Clone(subjects), Key: key}, nil
}

// derivedAccountKey is an account key derived (HKDF-SHA256) from the operator signing
// key's seed, for one purpose.
func derivedAccountKey(operatorSigner nkeys.KeyPair, purpose string) (nkeys.KeyPair, error) {
	seed, err := operatorSigner.Seed()
	if err != nil {
		return nil, fmt.Errorf("deriving the %s: %w", purpose, err)
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("deriving the %s: %w", purpose, err)
	}
	derived, err := hkdf.Key(sha256.New, raw, nil, purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the %s: %w", purpose, err)
	}
	return nkeys.FromRawSeed(nkeys.PrefixByteAccount, derived)
}

// subject is the full subject a tenant sends for one of the consumer's.
func subject(code, relative string) string { return "capsule." + code + "." + relative }

// Import adds to a tenant's account claims, built by Claims for limits l, its imports
// of the consumer's service: its own subjects alone, each with an activation token
// bound to the tenant's account. A closed account imports nothing (Sends).
func (c *Consumer) Import(ac *jwt.AccountClaims, code string, l Limits) error {
	if len(Sends(c.Subjects, l)) == 0 {
		return nil
	}
	consumerPub, err := c.Key.PublicKey()
	if err != nil {
		return err
	}
	for _, rel := range c.Subjects {
		act := jwt.NewActivationClaims(ac.Subject)
		act.Name = ConsumerName + " " + rel
		act.ImportSubject, act.ImportType = jwt.Subject(subject(code, rel)), jwt.Service
		token, err := act.Encode(c.Key)
		if err != nil {
			return fmt.Errorf("activation of %s's %s for the consumer: %w", code, rel, err)
		}
		ac.Imports.Add(&jwt.Import{Name: ConsumerName + " " + rel, Subject: jwt.Subject(subject(code, rel)),
			Account: consumerPub, Token: token, Type: jwt.Service})
	}
	ac.Limits.Imports = int64(len(c.Subjects))
	return nil
}

// Claims builds the consumer account's claims: no limit on its clients, no JetStream,
// no bearer users, every user issued before usersFrom revoked (the zero time: none),
// and the service every tenant sends its subjects to, for the accounts holding a token
// alone.
func (c *Consumer) Claims(usersFrom time.Time) (*jwt.AccountClaims, error) {
	pub, err := c.Key.PublicKey()
	if err != nil {
		return nil, err
	}
	ac := jwt.NewAccountClaims(pub)
	ac.Name = ConsumerName
	ac.Limits.Conn, ac.Limits.LeafNodeConn, ac.Limits.Subs = jwt.NoLimit, 0, jwt.NoLimit
	ac.Limits.Payload, ac.Limits.Data, ac.Limits.Imports = jwt.NoLimit, jwt.NoLimit, 0
	ac.Limits.Exports, ac.Limits.WildcardExports, ac.Limits.DisallowBearer = int64(len(c.Subjects)), true, true
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{}
	if !usersFrom.IsZero() {
		// The server refuses a user whose JWT was issued at or before this time.
		ac.RevokeAt(jwt.All, usersFrom.Add(-time.Second))
	}
	for _, rel := range c.Subjects {
		ac.Exports.Add(&jwt.Export{Name: rel, Subject: jwt.Subject(subject("*", rel)), Type: jwt.Service,
			TokenReq: true, ResponseType: jwt.ResponseTypeSingleton, ResponseThreshold: ResponseThreshold})
	}
	return ac, nil
}

// SubjectsOverlap reports whether two consumer subjects (under capsule.<CODE>.) hold a
// subject in common, one containing the other: NATS refuses an account whose exports,
// or imports, overlap.
func SubjectsOverlap(a, b string) bool {
	sa, sb := jwt.Subject(subject("ACMECO", a)), jwt.Subject(subject("ACMECO", b))
	return sa.IsContainedIn(sb) || sb.IsContainedIn(sa)
}

// CheckConsumerSubject says why a subject an environment names for its consumer (under
// capsule.<CODE>.) is not one: it must be tokens of letters, digits, '-' and '_',
// '*' for a whole token, '>' last, and not reach the tenant's commands.
func CheckConsumerSubject(rel string) error {
	tokens := strings.Split(rel, ".")
	for i, tok := range tokens {
		switch {
		case tok == ">" && i == len(tokens)-1, tok == "*" && i > 0:
		case tok == "" || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "":
			return fmt.Errorf("%q: token %d (%q) is not letters, digits, '-' or '_' (or '*', '>' last)", rel, i+1, tok)
		}
	}
	if code := "ACMECO"; !strings.HasPrefix(subject(code, rel), tenant.EventsQueue(code)+".") {
		return fmt.Errorf("%q: a consumer receives a tenant's events.… subjects alone (%s.…), not %q", rel, tenant.EventsQueue("<CODE>"), tokens[0])
	}
	return nil
}
