package natsaccount

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/tenant"
)

// ConsumerName is the name of the platform's consumer account, beside its public key.
const ConsumerName = "eva-consumer"

// Consumer is the one crossing between accounts an environment may declare
// (natsConsumer in its environment.yaml): an account of the platform's consumer of
// tenant events, which imports from every tenant's account the subjects named, under
// that tenant's capsule.<CODE>. Each tenant's account exports them as private streams
// (an activation token required), and the consumer's import of each carries a token
// issued for the consumer account alone: no other account, another tenant's or one the
// platform signs, can import them. Nothing flows the other way.
//
// Both keys are derived from the NATS operator signing key the platform gives Eva (the
// one secret Eva needs for every account it signs), so nothing more is stored, and a
// new signing key makes new ones.
type Consumer struct {
	// Subjects are relative to a tenant's capsule.<CODE>. ("events.>").
	Subjects []string
	// Key is the consumer account's key: it signs the consumer's users.
	Key nkeys.KeyPair
	// ExportSigner signs the activation tokens. It is a scoped signing key of every
	// tenant's account whose scope lets a user it signed do nothing, so holding it
	// gives no way into a tenant's subjects.
	ExportSigner nkeys.KeyPair
}

// ImportedTenant is one tenant's account, as the consumer imports from it.
type ImportedTenant struct {
	// Code is the tenant's capsule code; Account its account's public key.
	Code, Account string
}

// NewConsumer derives the consumer's keys from the operator signing key.
func NewConsumer(operatorSigner nkeys.KeyPair, subjects []string) (*Consumer, error) {
	key, err := derivedAccountKey(operatorSigner, "eva nats consumer account")
	if err != nil {
		return nil, err
	}
	signer, err := derivedAccountKey(operatorSigner, "eva nats export signer")
	if err != nil {
		return nil, err
	}
	return &Consumer{Subjects: slices.Clone(subjects), Key: key, ExportSigner: signer}, nil
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

// subject is the full subject a tenant exports for one of the consumer's.
func subject(code, relative string) string { return "capsule." + code + "." + relative }

// Export adds to a tenant's account claims its exports to the consumer and the export
// signer, scoped so that a user it signed may neither publish nor subscribe.
func (c *Consumer) Export(ac *jwt.AccountClaims, code string) error {
	signerPub, err := c.ExportSigner.PublicKey()
	if err != nil {
		return err
	}
	scope := jwt.NewUserScope()
	scope.Key, scope.Role = signerPub, "eva-exports"
	scope.Template.Pub.Deny.Add(">")
	scope.Template.Sub.Deny.Add(">")
	scope.Template.Limits.Subs, scope.Template.Limits.Data, scope.Template.Limits.Payload = 0, 0, 0
	ac.SigningKeys.AddScopedSigner(scope)
	for _, rel := range c.Subjects {
		ac.Exports.Add(&jwt.Export{Name: rel, Subject: jwt.Subject(subject(code, rel)), Type: jwt.Stream, TokenReq: true})
	}
	ac.Limits.Exports = int64(len(c.Subjects))
	ac.Limits.WildcardExports = slices.ContainsFunc(c.Subjects, func(s string) bool { return strings.ContainsAny(s, "*>") })
	return nil
}

// Claims builds the consumer account's claims: no limit on its clients, no JetStream,
// no bearer users, and an import of every tenant's exports, each with an activation
// token for this account alone.
func (c *Consumer) Claims(tenants []ImportedTenant) (*jwt.AccountClaims, error) {
	pub, err := c.Key.PublicKey()
	if err != nil {
		return nil, err
	}
	ac := jwt.NewAccountClaims(pub)
	ac.Name = ConsumerName
	ac.Limits.Conn, ac.Limits.LeafNodeConn, ac.Limits.Subs = jwt.NoLimit, 0, jwt.NoLimit
	ac.Limits.Payload, ac.Limits.Data, ac.Limits.Imports, ac.Limits.Exports = jwt.NoLimit, jwt.NoLimit, jwt.NoLimit, 0
	ac.Limits.WildcardExports, ac.Limits.DisallowBearer = false, true
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{}
	for _, t := range tenants {
		if !nkeys.IsValidPublicAccountKey(t.Account) {
			return nil, fmt.Errorf("consumer's import from %s: %q is not an account public key", t.Code, t.Account)
		}
		for _, rel := range c.Subjects {
			token, err := c.activation(pub, t, rel)
			if err != nil {
				return nil, err
			}
			ac.Imports.Add(&jwt.Import{Name: t.Code + " " + rel, Subject: jwt.Subject(subject(t.Code, rel)),
				Account: t.Account, Token: token, Type: jwt.Stream})
		}
	}
	return ac, nil
}

// activation is the token by which the tenant's account lets the consumer import one
// subject: bound to the consumer's public key, signed by the export signer on the
// tenant account's behalf.
func (c *Consumer) activation(consumerPub string, t ImportedTenant, rel string) (string, error) {
	act := jwt.NewActivationClaims(consumerPub)
	act.Name = ConsumerName + " " + rel
	act.ImportSubject, act.ImportType = jwt.Subject(subject(t.Code, rel)), jwt.Stream
	act.IssuerAccount = t.Account
	token, err := act.Encode(c.ExportSigner)
	if err != nil {
		return "", fmt.Errorf("activation of %s's %s for the consumer: %w", t.Code, rel, err)
	}
	return token, nil
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
		return fmt.Errorf("%q: a consumer imports a tenant's events.… subjects alone (%s.…), not %q", rel, tenant.EventsQueue("<CODE>"), tokens[0])
	}
	return nil
}
