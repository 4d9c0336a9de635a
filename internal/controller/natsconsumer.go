package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/natsaccount"
	"github.com/aidonow/eva/internal/tenant"
)

const (
	// ConsumerCredsSecret is the Secret, in the operator's namespace, holding the
	// credentials of the platform's consumer of tenant events (key tenant.NATSCredsKey).
	ConsumerCredsSecret = "eva-nats-consumer"
	// annotationConsumerAccount records, on ConsumerCredsSecret, the account its user is
	// of: credentials of another (the operator's signing key changed) are issued again.
	annotationConsumerAccount = "eva.aidonow.com/nats-account"
	// consumerPushKey is the consumer's entry in Accounts.pushed (never a capsule code).
	consumerPushKey = "consumer"
)

// consumerOf is the platform's consumer of tenant events (the environment's
// natsConsumer: natsaccount.Consumer) that a tenant account pushed with signer sends
// its events to, made current first: its users' credentials, the Secret
// ConsumerCredsSecret for the platform to hand its consumer, then its account on the
// resolver, revoking every user issued before those credentials. Both are done once
// per process and operator signing key (deleting the Secret to rotate the credentials
// takes a restart of the operator); nil without natsConsumer.
func (a *Accounts) consumerOf(ctx context.Context, signer nkeys.KeyPair) (*natsaccount.Consumer, error) {
	if len(a.ConsumerSubjects) == 0 {
		return nil, nil
	}
	consumer, err := natsaccount.NewConsumer(signer, a.ConsumerSubjects)
	if err != nil {
		return nil, err
	}
	pub, _ := consumer.Key.PublicKey()
	digest := fmt.Sprintf("%s %q", pub, a.ConsumerSubjects)
	a.mu.Lock()
	done := a.pushed[consumerPushKey] == digest
	a.mu.Unlock()
	if done {
		return consumer, nil
	}
	issued, err := a.writeConsumerCreds(ctx, consumer)
	if err != nil {
		return nil, err
	}
	if err := a.pushConsumer(ctx, consumer, signer, issued); err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.pushed == nil {
		a.pushed = map[string]string{}
	}
	a.pushed[consumerPushKey] = digest
	a.mu.Unlock()
	return consumer, nil
}

// pushConsumer signs and pushes the consumer's account, its users issued before
// issued revoked.
func (a *Accounts) pushConsumer(ctx context.Context, consumer *natsaccount.Consumer, signer nkeys.KeyPair, issued time.Time) error {
	ac, err := consumer.Claims(issued)
	if err != nil {
		return err
	}
	return a.signAndPush(ctx, ac, signer, ": the platform's consumer account")
}

// writeConsumerCreds issues a user of the consumer's account into ConsumerCredsSecret,
// unless it holds one of this account already, and returns when the user it holds was
// issued.
func (a *Accounts) writeConsumerCreds(ctx context.Context, consumer *natsaccount.Consumer) (time.Time, error) {
	pub, _ := consumer.Key.PublicKey()
	var secret corev1.Secret
	err := a.Reader.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: ConsumerCredsSecret}, &secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return time.Time{}, fmt.Errorf("%w: reading the platform consumer's credentials %s/%s: %w", errAccount, a.Namespace, ConsumerCredsSecret, err)
	}
	found := err == nil
	if found && secret.Annotations[annotationConsumerAccount] == pub {
		if issued, err := natsaccount.IssuedAt(secret.Data[tenant.NATSCredsKey]); err == nil {
			return issued, nil
		}
	}
	creds, _, err := natsaccount.User(natsaccount.ConsumerName, "platform-consumer", consumer.Key, a.now())
	if err != nil {
		return time.Time{}, err
	}
	issued, err := natsaccount.IssuedAt(creds)
	if err != nil {
		return time.Time{}, err
	}
	if !found {
		secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: ConsumerCredsSecret}, Type: corev1.SecretTypeOpaque}
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[annotationConsumerAccount] = pub
	secret.Data = map[string][]byte{tenant.NATSCredsKey: creds}
	if found {
		err = a.Client.Update(ctx, &secret)
	} else {
		err = a.Client.Create(ctx, &secret)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: writing the platform consumer's credentials %s/%s: %w", errAccount, a.Namespace, ConsumerCredsSecret, err)
	}
	return issued, nil
}
