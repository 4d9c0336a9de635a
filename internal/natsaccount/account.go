// Package natsaccount mints each tenant's NATS account, the NATS-native fence of its
// messaging: subjects, streams and consumers of one account are invisible to every
// other, and the server itself holds the account to its tier's limits. Eva signs each
// tenant's account JWT with a signing key of the platform's NATS operator, signs the
// tenant's users with the account's own key, and pushes the account to the server's
// full resolver through the system account ($SYS.REQ.CLAIMS.UPDATE). Nothing is
// exported or imported between accounts but what an environment declares for the
// platform's consumer of tenant events (Consumer). Its functions that build claims are
// pure; the Resolver is the one that talks to NATS.
package natsaccount

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/aidonow/eva/internal/tenant"
)

// Limits are what one tenant's account may use of the NATS server.
type Limits struct {
	// Connections, Subscriptions and Payload (bytes of one message) bound the
	// account's clients.
	Connections, Subscriptions, Payload int64
	// Streams, Consumers and DiskStorage bound its JetStream use; StreamMaxBytes is the
	// most one stream may reserve. Every stream must declare its size (MaxBytesRequired),
	// so the storage is reserved, not overcommitted.
	Streams, Consumers, DiskStorage, StreamMaxBytes int64
}

// LimitsOf is a tier's account: its messaging limits from the catalog, and JetStream
// storage for exactly the tenant's two streams (events and commands), each at the
// tier's stream size, replicas counted. A workload cannot create a third stream, nor one
// larger than the tier's, nor store a byte past what its streams reserve.
func LimitsOf(spec tenant.TierSpec) Limits {
	a, s := spec.Account, spec.Streams
	replicas := max(int64(s.Replicas), 1)
	return Limits{
		Connections: a.Connections, Subscriptions: a.Subscriptions, Payload: a.MaxPayload,
		Streams: 2, Consumers: a.Consumers, DiskStorage: 2 * s.MaxBytes * replicas, StreamMaxBytes: s.MaxBytes,
	}
}

// Name is the account's name, as the server reports it beside its public key.
func Name(code string) string { return "eva-" + code }

// Claims builds the account JWT's claims of a tenant: named Name(code), subject the
// account's public key, with the limits and no exports or imports (Consumer.Export adds
// the consumer's). revoked maps user
// public keys (or jwt.All, every user) to the time before which their JWTs are revoked:
// a rotation revokes the old user, a decommission every one.
func Claims(code, accountPub string, l Limits, revoked map[string]time.Time) (*jwt.AccountClaims, error) {
	if !nkeys.IsValidPublicAccountKey(accountPub) {
		return nil, fmt.Errorf("account of %s: %q is not an account public key", code, accountPub)
	}
	ac := jwt.NewAccountClaims(accountPub)
	ac.Name = Name(code)
	ac.Limits.Conn, ac.Limits.LeafNodeConn = l.Connections, 0
	ac.Limits.Subs, ac.Limits.Payload, ac.Limits.Data = l.Subscriptions, l.Payload, jwt.NoLimit
	ac.Limits.Imports, ac.Limits.Exports, ac.Limits.WildcardExports = 0, 0, false
	ac.Limits.DisallowBearer = true
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		Streams: l.Streams, Consumer: l.Consumers, DiskStorage: l.DiskStorage, MemoryStorage: 0,
		DiskMaxStreamBytes: l.StreamMaxBytes, MaxBytesRequired: true, MaxAckPending: jwt.NoLimit,
	}
	for user, before := range revoked {
		ac.RevokeAt(user, before)
	}
	return ac, nil
}

// Closed is the limits of a decommissioned tenant's account: no connection, no
// JetStream. Pushed with every user revoked, it shuts out whoever still holds the
// tenant's credentials.
var Closed = Limits{}

// Sends is the consumer's subjects an account of limits l sends to it: all of them
// while it is open, none once it is closed, so that a decommissioned tenant's last
// messages, racing the server's close of its connections, reach no one.
func Sends(consumerSubjects []string, l Limits) []string {
	if l == Closed {
		return nil
	}
	return consumerSubjects
}

// Sign encodes the account claims with the operator's signing key.
func Sign(ac *jwt.AccountClaims, operatorSigner nkeys.KeyPair) (string, error) {
	var vr jwt.ValidationResults
	ac.Validate(&vr)
	if errs := vr.Errors(); len(errs) > 0 {
		return "", fmt.Errorf("account %s: %w", ac.Name, errors.Join(errs...))
	}
	token, err := ac.Encode(operatorSigner)
	if err != nil {
		return "", fmt.Errorf("signing account %s: %w", ac.Name, err)
	}
	return token, nil
}

// User issues credentials of one user of the tenant's account: a new user key and its
// JWT, signed by the account's key (accountKey, which only the operator holds), in the
// creds file format NATS clients read. The user is a bearer of nothing: it must sign
// the server's nonce with its seed. It may publish and subscribe to any subject of its
// own account, which no other account sees.
func User(code, name string, accountKey nkeys.KeyPair, issuedAt time.Time) (creds []byte, userPub string, err error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", fmt.Errorf("user key of %s: %w", code, err)
	}
	userPub, err = user.PublicKey()
	if err != nil {
		return nil, "", err
	}
	accountPub, err := accountKey.PublicKey()
	if err != nil {
		return nil, "", err
	}
	uc := jwt.NewUserClaims(userPub)
	uc.Name, uc.IssuerAccount = name, ""
	uc.IssuedAt = issuedAt.Unix()
	uc.BearerToken = false
	uc.Limits.Subs, uc.Limits.Data, uc.Limits.Payload = jwt.NoLimit, jwt.NoLimit, jwt.NoLimit
	if accountPub == "" {
		return nil, "", fmt.Errorf("user of %s: the account key has no public key", code)
	}
	token, err := uc.Encode(accountKey)
	if err != nil {
		return nil, "", fmt.Errorf("signing user %s of %s: %w", name, code, err)
	}
	seed, err := user.Seed()
	if err != nil {
		return nil, "", err
	}
	creds, err = jwt.FormatUserConfig(token, seed)
	if err != nil {
		return nil, "", fmt.Errorf("credentials of user %s of %s: %w", name, code, err)
	}
	return creds, userPub, nil
}

// IssuedAt is when the user of a creds file's content was issued (its JWT's iat).
func IssuedAt(creds []byte) (time.Time, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return time.Time{}, fmt.Errorf("credentials: %w", err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		return time.Time{}, fmt.Errorf("credentials: %w", err)
	}
	return time.Unix(uc.IssuedAt, 0), nil
}

// CredsOption is the nats.go option that authenticates as the user of a creds file's
// content: its JWT, and its seed signing the server's nonce.
func CredsOption(creds []byte) (nats.Option, error) {
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	seed, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return nats.UserJWT(func() (string, error) { return token, nil }, func(nonce []byte) ([]byte, error) { return seed.Sign(nonce) }), nil
}
