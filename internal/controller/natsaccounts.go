package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
)

// The Secrets of tenants' NATS accounts.
const (
	// accountSeedKey is the key of an account's seed in its key Secret, and of the
	// operator signing key's seed in the platform's Secret.
	accountSeedKey = "seed"
	// systemCredsKey is the key of the system user's credentials in the platform's
	// Secret.
	systemCredsKey = "creds"
	// revokedKey holds, in an account's key Secret, the users its JWT revokes (public
	// key to Unix time, JSON): kept there so that every push, after a restart too,
	// revokes them.
	revokedKey = "revoked"
	// annotationWorkloadUser records, on an account's key Secret, the public key of the
	// user whose credentials the tenant's workloads hold: revoked when they are rotated.
	annotationWorkloadUser = "eva.aidonow.com/workload-user"
	// annotationRotation records the tenant's rotation request the workloads'
	// credentials answer (AnnotationRotateNATSCredentials' value).
	annotationRotation = "eva.aidonow.com/rotation"
	// workloadCredsKey holds, in the key Secret, the workloads' credentials: the
	// tenant's tenant.NATSCredsSecret is a copy the operator writes without reading it back.
	workloadCredsKey = "workload.creds"
)

// errAccount marks a tenant account that cannot be made: what is missing is in the
// message, and the tenant's Provisioned condition carries it.
var errAccount = errors.New("the tenant's NATS account")

// accountKeySecret names the Secret (in the operator's namespace) that holds the seed of
// a tenant's account key: only the operator reads it.
func accountKeySecret(code string) string { return "eva-nats-account-" + strings.ToLower(code) }

// Accounts gives each tenant a NATS account of its own (internal/natsaccount) in direct
// messaging mode. The platform gives the operator its NATS operator's signing key and a
// system account user, as Secrets in the operator's namespace; each tenant's account key
// is a Secret there too, made on first use. The account's JWT, with the tier's limits,
// is pushed to the resolver when it changes; the operator reaches the tenant's streams
// as a user of that account, and the tenant's workloads get credentials of their own in
// their namespace (tenant.NATSCredsSecret). Nothing falls back to a shared account: a missing
// Secret, or a server refusing the account, is an error naming it.
type Accounts struct {
	// Reader reads the Secrets (the API server: the cache holds none); Client writes
	// them.
	Reader client.Reader
	Client client.Client
	// Namespace is the operator's: the signing key, the system user, the account keys.
	Namespace string
	// SignerSecret and SystemSecret name the platform's Secrets: the operator signing
	// key's seed (key "seed") and the system user's credentials (key "creds").
	SignerSecret, SystemSecret string
	// Config is how to reach NATS (URL, TLS); the credentials are each account's.
	Config messaging.Config
	// Now returns the current time (tests fix it).
	Now func() time.Time
	// HoldCreds puts natsCredsFinalizer on the credentials' Secret (NACK mode: NACK
	// deletes the tenant's streams with them, after the namespace's deletion began);
	// NACKAccounts lets it go (ReleaseCreds).
	HoldCreds bool
	// ConsumerSubjects, when the environment declares a consumer of tenant events
	// (natsConsumer), are what every open tenant account sends to it (consumerOf).
	ConsumerSubjects []string
	// clientIdle is how long a connection to a tenant's account is kept idle
	// (defaultClientIdle when 0; tests shorten it).
	clientIdle time.Duration

	mu          sync.Mutex
	signerMu    sync.Mutex    // held while the signing key is read
	signerKey   nkeys.KeyPair // the operator signing key, read at signerRead
	signerRead  time.Time
	system      *nats.Conn
	pushed      map[string]string        // code (or consumerPushKey): digest of what was last pushed
	copies      map[string]string        // code: digest of the workloads' credentials last written
	clients     map[string]*pooledClient // code: the operator's connection to its account (natsaccountclients.go)
	trimPending bool                     // a look at the idle connections is due
	doomed      []*messaging.Client      // retired connections, closed by unlockClosing
	accounts    map[string]cachedAccount // code: what the operator keeps of its account
}

// account is what the operator keeps of a tenant's account: its key, the users its
// JWT revokes, and the user its workloads hold (the key Secret).
type account struct {
	key      nkeys.KeyPair
	revoked  map[string]time.Time
	workload string
	secret   *corev1.Secret
}

// workloadCreds are the credentials its workloads hold, if they answer rotation.
func (acct *account) workloadCreds(rotation string) []byte {
	if acct.workload == "" || acct.secret.Annotations[annotationRotation] != rotation {
		return nil
	}
	return acct.secret.Data[workloadCredsKey]
}

// Ensure makes the tenant's account current on the resolver, from one read of what
// the operator keeps of it, and returns its public key and its workloads' credentials
// (StreamsOf reaches its streams): those issued for the rotation request
// (the tenant's AnnotationRotateNATSCredentials, "" for none), or a new user's when it
// changed, the user they held before revoked. New credentials are recorded with the
// account (the key Secret) before the account is pushed and they are handed out. A key
// made now records owner (tenant.Owner: the EvaTenant's UID, or tenant.FileOwner).
// fresh says the caller knows of no account of the tenant yet (an EvaTenant whose
// status records none): the key is then made without reading first, which a key
// already there (a status write lost) turns into that read.
func (a *Accounts) Ensure(ctx context.Context, code, owner string, limits natsaccount.Limits, rotation string, fresh bool) (string, []byte, error) {
	var acct *account
	var err error
	if !fresh {
		acct, err = a.account(ctx, code)
	}
	if err == nil && acct == nil {
		acct, err = a.create(ctx, code, owner, rotation)
	}
	if err != nil {
		return "", nil, err
	}
	if !acct.ownedBy(owner) {
		return "", nil, fmt.Errorf("%w of %s: it was made for another owner (%s), not this tenant (%s)",
			errAccount, code, acct.secret.Annotations[tenant.AnnotationOwnerUID], owner)
	}
	pub, _ := acct.key.PublicKey()
	creds := acct.workloadCreds(rotation)
	if creds == nil {
		if creds, err = a.issueWorkloadCreds(ctx, code, acct, rotation, false); err != nil {
			return pub, nil, err
		}
	}
	if err := a.push(ctx, code, pub, limits, acct.revoked); err != nil {
		return pub, nil, err
	}
	return pub, creds, nil
}

// Open reports whether owner's tenant has an account Close has not closed (its key
// Secret).
func (a *Accounts) Open(ctx context.Context, code, owner string) (bool, error) {
	acct, err := a.account(ctx, code)
	return acct != nil && acct.ownedBy(owner), err
}

// ownedBy reports whether the account was made for owner (tenant.Owner). A key made
// before owners were recorded is an EvaTenant's: tenant files had no account then.
func (acct *account) ownedBy(owner string) bool {
	recorded := acct.secret.Annotations[tenant.AnnotationOwnerUID]
	if recorded == "" {
		return owner != tenant.FileOwner
	}
	return recorded == owner
}

// StreamsOf returns a client of the streams of owner's tenant, a user of its account,
// nil when the account was never made or was made for another owner (nothing of it is
// this tenant's to reach), and the function that gives the client back
// (natsaccountclients.go), which the caller calls once done with it.
func (a *Accounts) StreamsOf(ctx context.Context, code, owner string) (*messaging.Client, func(), error) {
	acct, err := a.account(ctx, code)
	if err != nil || acct == nil || !acct.ownedBy(owner) {
		return nil, func() {}, err
	}
	return a.leaseClient(code, acct.key)
}

// issueWorkloadCreds issues credentials of a new user for the tenant's workloads,
// revokes the user they held before, and records both in the key Secret, with the new
// user as the one a decommission cut them off with when cutOff says so
// (CutOffWorkloads).
func (a *Accounts) issueWorkloadCreds(ctx context.Context, code string, acct *account, rotation string, cutOff bool) ([]byte, error) {
	creds, user, err := natsaccount.User(code, "workloads", acct.key, a.now())
	if err != nil {
		return nil, err
	}
	if acct.workload != "" {
		acct.revoked[acct.workload] = a.now()
	}
	revoked, err := json.Marshal(unixTimes(acct.revoked))
	if err != nil {
		return nil, err
	}
	acct.secret.Data[revokedKey] = revoked
	if acct.secret.Annotations == nil {
		acct.secret.Annotations = map[string]string{}
	}
	acct.secret.Annotations[annotationWorkloadUser] = user
	acct.secret.Annotations[annotationRotation] = rotation
	if cutOff {
		acct.secret.Annotations[annotationCutOff] = user
	}
	acct.secret.Data[workloadCredsKey] = creds
	if err := a.Client.Update(ctx, acct.secret); err != nil {
		a.forget(code)
		return nil, fmt.Errorf("%w of %s: recording its workloads' user: %w", errAccount, code, err)
	}
	a.remember(code, acct)
	return creds, nil
}

func unixTimes(m map[string]time.Time) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Unix()
	}
	return out
}

// create makes the tenant's account key for owner, with its workloads' first user (for
// the rotation request rotation), in one write of the key Secret; a key another worker
// made meanwhile is read instead.
func (a *Accounts) create(ctx context.Context, code, owner, rotation string) (*account, error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	creds, user, err := natsaccount.User(code, "workloads", kp, a.now())
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: accountKeySecret(code),
		Labels: map[string]string{tenant.LabelCapsule: code},
		Annotations: map[string]string{tenant.AnnotationOwnerUID: owner, annotationWorkloadUser: user,
			annotationRotation: rotation}}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{accountSeedKey: seed, workloadCredsKey: creds}}
	if err := a.Client.Create(ctx, secret); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%w of %s: creating its key Secret %s/%s: %w", errAccount, code, a.Namespace, secret.Name, err)
		}
		acct, err := a.account(ctx, code) // another worker made it: use that one
		if err == nil && acct == nil {
			err = fmt.Errorf("%w of %s: its key Secret was made and deleted meanwhile", errAccount, code)
		}
		return acct, err
	}
	acct := &account{key: kp, revoked: map[string]time.Time{}, workload: user, secret: secret}
	a.remember(code, acct)
	return acct, nil
}

// account reads what the operator keeps of the tenant's account (nil, nil when there is
// none), from the API server unless it was read or written lately (cachedAccount).
func (a *Accounts) account(ctx context.Context, code string) (*account, error) {
	if acct := a.cachedAccount(code); acct != nil {
		return acct, nil
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: a.Namespace, Name: accountKeySecret(code)}
	err := a.Reader.Get(ctx, key, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w of %s: reading its key Secret %s: %w", errAccount, code, key, err)
	}
	kp, err := nkeys.FromSeed(secret.Data[accountSeedKey])
	if err != nil || !strings.HasPrefix(string(secret.Data[accountSeedKey]), "SA") {
		return nil, fmt.Errorf("%w of %s: Secret %s holds no account seed under %q", errAccount, code, key, accountSeedKey)
	}
	acct := &account{key: kp, revoked: map[string]time.Time{}, workload: secret.Annotations[annotationWorkloadUser], secret: &secret}
	if raw := secret.Data[revokedKey]; len(raw) > 0 {
		var at map[string]int64
		if err := json.Unmarshal(raw, &at); err != nil {
			return nil, fmt.Errorf("%w of %s: Secret %s: %q is not a revocation list: %w", errAccount, code, key, revokedKey, err)
		}
		for user, unix := range at {
			acct.revoked[user] = time.Unix(unix, 0)
		}
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	a.remember(code, acct)
	return acct, nil
}

// push signs and pushes the account unless what it says was pushed already by this
// process.
func (a *Accounts) push(ctx context.Context, code, pub string, limits natsaccount.Limits, revoked map[string]time.Time) error {
	signer, err := a.signer(ctx)
	if err != nil {
		return err
	}
	exports := natsaccount.Sends(a.ConsumerSubjects, limits)
	digest, err := accountDigest(pub, signer, limits, revoked, exports)
	if err != nil {
		return err
	}
	a.mu.Lock()
	done := a.pushed[code] == digest
	a.mu.Unlock()
	if done {
		return nil
	}
	ac, err := natsaccount.Claims(code, pub, limits, revoked)
	if err != nil {
		return err
	}
	if len(exports) > 0 {
		consumer, err := a.consumerOf(ctx, signer)
		if err == nil {
			err = consumer.Import(ac, code, limits)
		}
		if err != nil {
			return fmt.Errorf("%w of %s: its events for the platform's consumer: %w", errAccount, code, err)
		}
	}
	if err := a.signAndPush(ctx, ac, signer, " of "+code); err != nil {
		return err
	}
	a.mu.Lock()
	if a.pushed == nil {
		a.pushed = map[string]string{}
	}
	a.pushed[code] = digest
	a.mu.Unlock()
	return nil
}

// signAndPush signs the account claims with the operator signing key and pushes them
// to the resolver as the system user; a refused push names the account (of: " of
// <code>", ": the platform's consumer account").
func (a *Accounts) signAndPush(ctx context.Context, ac *jwt.AccountClaims, signer nkeys.KeyPair, of string) error {
	token, err := natsaccount.Sign(ac, signer)
	if err != nil {
		return err
	}
	system, err := a.systemConn(ctx)
	if err != nil {
		return err
	}
	if err := (&natsaccount.Resolver{Conn: system, Timeout: a.Config.Timeout}).Push(ctx, token); err != nil {
		return fmt.Errorf("%w%s: %w", errAccount, of, err)
	}
	return nil
}

// accountDigest is what an account's JWT says, and who signs it: a new operator signing
// key signs every account again (the server takes none signed by a key its operator no
// longer lists) and, with natsConsumer, sends the account's events to the consumer
// account derived from the new key.
func accountDigest(pub string, signer nkeys.KeyPair, l natsaccount.Limits, revoked map[string]time.Time, exports []string) (string, error) {
	signerPub, err := signer.PublicKey()
	if err != nil {
		return "", fmt.Errorf("%w: the operator signing key: %w", errAccount, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %+v %q", pub, signerPub, l, exports)
	users := make([]string, 0, len(revoked))
	for user := range revoked {
		users = append(users, user)
	}
	sort.Strings(users)
	for _, user := range users {
		fmt.Fprintf(h, " %s@%d", user, revoked[user].Unix())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// signerTTL is how long the operator signing key read from the platform's Secret is
// used before it is read again: a new key in the Secret is taken within it, and a fleet
// being provisioned costs one read of it a minute, not one per tenant.
const signerTTL = time.Minute

// signer returns the operator signing key from the platform's Secret, read at most
// once per signerTTL.
func (a *Accounts) signer(ctx context.Context) (nkeys.KeyPair, error) {
	a.signerMu.Lock() // one read for the workers that all found it stale
	defer a.signerMu.Unlock()
	a.mu.Lock()
	kp, read := a.signerKey, a.signerRead
	a.mu.Unlock()
	if kp != nil && a.now().Sub(read) < signerTTL {
		return kp, nil
	}
	seed, err := a.platformSecret(ctx, a.SignerSecret, accountSeedKey)
	if err != nil {
		return nil, err
	}
	kp, err = nkeys.FromSeed(seed)
	if err != nil || !strings.HasPrefix(string(seed), "SO") {
		return nil, fmt.Errorf("%w: Secret %s/%s holds no NATS operator signing key seed (SO…) under %q",
			errAccount, a.Namespace, a.SignerSecret, accountSeedKey)
	}
	a.mu.Lock()
	a.signerKey, a.signerRead = kp, a.now()
	a.mu.Unlock()
	return kp, nil
}

func (a *Accounts) platformSecret(ctx context.Context, name, key string) ([]byte, error) {
	var secret corev1.Secret
	if err := a.Reader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: the platform's Secret %s/%s is missing (key %q): see docs/messaging.md", errAccount, a.Namespace, name, key)
		}
		return nil, fmt.Errorf("%w: reading Secret %s/%s: %w", errAccount, a.Namespace, name, err)
	}
	if len(secret.Data[key]) == 0 {
		return nil, fmt.Errorf("%w: Secret %s/%s has no key %q", errAccount, a.Namespace, name, key)
	}
	return secret.Data[key], nil
}

// systemConn is the connection of the system user, made on first use.
func (a *Accounts) systemConn(ctx context.Context) (*nats.Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.system != nil && !a.system.IsClosed() {
		return a.system, nil
	}
	creds, err := a.platformSecret(ctx, a.SystemSecret, systemCredsKey)
	if err != nil {
		return nil, err
	}
	nc, err := a.connect(creds, "eva-operator-system")
	if err != nil {
		return nil, fmt.Errorf("%w: connecting as the system user of Secret %s/%s: %w", errAccount, a.Namespace, a.SystemSecret, err)
	}
	a.system = nc
	return nc, nil
}

// connect connects with a creds file's content, failing at once on refusal.
func (a *Accounts) connect(creds []byte, name string) (*nats.Conn, error) {
	user, err := natsaccount.CredsOption(creds)
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second), user}
	if a.Config.CertFile != "" || a.Config.KeyFile != "" {
		opts = append(opts, nats.ClientCert(a.Config.CertFile, a.Config.KeyFile))
	}
	if a.Config.CAFile != "" {
		opts = append(opts, nats.RootCAs(a.Config.CAFile))
	}
	return nats.Connect(a.Config.URL, opts...)
}

func (a *Accounts) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// DepthSnapshot reads how many messages every account's streams hold, as the system
// user (the queue-depth loop's reader when each tenant has an account): one request a
// page of 256 accounts, where reading each tenant's through its account took a
// connection of each.
func (a *Accounts) DepthSnapshot(ctx context.Context) (natsaccount.Depths, error) {
	sys, err := a.systemConn(ctx)
	if err != nil {
		return natsaccount.Depths{}, err
	}
	return natsaccount.ReadDepths(ctx, sys, a.Config.Timeout)
}

// copied reports whether this process wrote these credentials (by digest) into the
// tenant's namespace already.
func (a *Accounts) copied(code, digest string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.copies[code] == digest
}

func (a *Accounts) markCopied(code, digest string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.copies == nil {
		a.copies = map[string]string{}
	}
	a.copies[code] = digest
}

// WriteCreds writes the tenant's workloads' credentials (a user of its account) into
// its namespace: a Secret the module charts mount and its NACK Account names, a copy of
// what the account's key Secret records, applied (server-side) without reading it back:
// the operator reads no Secret of a tenant namespace. It is written again when the
// credentials change (a rotation: AnnotationRotateNATSCredentials) and once per
// operator process.
func (a *Accounts) WriteCreds(ctx context.Context, code string, creds []byte) error {
	digest := fmt.Sprintf("%x", sha256.Sum256(creds))
	if a.copied(code, digest) {
		return nil
	}
	secret := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code),
			Labels: map[string]string{tenant.LabelCapsule: code}}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{tenant.NATSCredsKey: creds}}
	if a.HoldCreds {
		secret.Finalizers = []string{natsCredsFinalizer}
	}
	if err := a.Client.Patch(ctx, secret, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the NATS credentials Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	a.markCopied(code, digest)
	return nil
}

// natsCredsFinalizer holds a tenant's credentials' Secret until its NACK Account is let
// go (HoldCreds, NACKAccounts).
const natsCredsFinalizer = "eva.aidonow.com/nats-credentials"

// ReleaseCreds takes natsCredsFinalizer off the tenant's credentials' Secret, without
// reading the Secret (the operator reads none in a tenant namespace); a Secret gone is
// released.
func (a *Accounts) ReleaseCreds(ctx context.Context, code string) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace(code), Name: tenant.NATSCredsSecret(code)}}
	patch := fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q]}}`, natsCredsFinalizer)
	if err := a.Client.Patch(ctx, secret, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("letting the NATS credentials Secret %s/%s go: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
