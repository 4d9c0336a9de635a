package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// OperatorNATS is an embedded NATS server in operator mode (decentralized JWT auth)
// with a full account resolver and JetStream, set up as a platform runs it for Eva:
// accounts are trusted when a signing key of its operator signed them, and are pushed
// to the resolver by a user of the system account.
type OperatorNATS struct {
	Server *server.Server
	// URL is the server's client URL.
	URL string
	// OperatorSigner is the operator's signing key, the one the platform gives Eva.
	OperatorSigner nkeys.KeyPair
	// NextSigner is a second signing key the operator lists, for a platform rotating
	// the key it gives Eva (nil in a NATSProcess).
	NextSigner nkeys.KeyPair
	// SystemCreds is the path of a system-account user's credentials file.
	SystemCreds string
	// SystemAccount is the system account's public key.
	SystemAccount string
}

// StartNATSOperator starts an OperatorNATS for one test, its resolver and store under
// dir; it stops when the test ends.
func StartNATSOperator(t testing.TB, dir string) *OperatorNATS {
	t.Helper()
	n, err := RunNATSOperator(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Server.Shutdown)
	return n
}

// RunNATSOperator starts an OperatorNATS on a free port of 127.0.0.1.
func RunNATSOperator(dir string) (*OperatorNATS, error) {
	identity, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	signer, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	next, err := nkeys.CreateOperator()
	if err != nil {
		return nil, err
	}
	system, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	operatorPub, _ := identity.PublicKey()
	signerPub, _ := signer.PublicKey()
	nextPub, _ := next.PublicKey()
	systemPub, _ := system.PublicKey()
	oc := jwt.NewOperatorClaims(operatorPub)
	oc.Name, oc.SystemAccount = "eva-test-operator", systemPub
	oc.SigningKeys.Add(signerPub, nextPub)
	operatorJWT, err := oc.Encode(identity)
	if err != nil {
		return nil, err
	}
	operator, err := jwt.DecodeOperatorClaims(operatorJWT)
	if err != nil {
		return nil, err
	}
	sc := jwt.NewAccountClaims(systemPub)
	sc.Name = "SYS"
	systemJWT, err := sc.Encode(signer)
	if err != nil {
		return nil, err
	}
	resolver, err := server.NewDirAccResolver(filepath.Join(dir, "resolver"), 0, time.Minute, server.NoDelete)
	if err != nil {
		return nil, err
	}
	if err := resolver.Store(systemPub, systemJWT); err != nil {
		return nil, err
	}
	creds, err := userCreds(system, "eva-system-user")
	if err != nil {
		return nil, err
	}
	credsFile := filepath.Join(dir, "system.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		return nil, err
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "jetstream"), JetStreamMaxStore: 1 << 40, NoLog: true, NoSigs: true,
		TrustedOperators: []*jwt.OperatorClaims{operator}, SystemAccount: systemPub, AccountResolver: resolver})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("NATS in operator mode did not start")
	}
	return &OperatorNATS{Server: s, URL: s.ClientURL(), OperatorSigner: signer, NextSigner: next, SystemCreds: credsFile, SystemAccount: systemPub}, nil
}

// userCreds issues a user of the account, in the creds file format.
func userCreds(account nkeys.KeyPair, name string) ([]byte, error) {
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	token, err := uc.Encode(account)
	if err != nil {
		return nil, err
	}
	seed, _ := user.Seed()
	return jwt.FormatUserConfig(token, seed)
}
