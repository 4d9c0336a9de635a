package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/aidonow/eva/internal/natsaccount"
)

// What a decommission does to a tenant's account: its workloads are cut off the bus
// first, so that nothing they hold keeps the streams' deletion out (RevokeWorkloads in
// direct mode, CutOffWorkloads in NACK mode), then the account is closed (Close).

// annotationCutOff records, on an account's key Secret, the workloads' user
// CutOffWorkloads issued: a decommission cuts the workloads off once.
const annotationCutOff = "eva.aidonow.com/cut-off-user"

// Close shuts the account owner's tenant has (no connection, no JetStream, every user
// revoked), then forgets its key: credentials anyone kept are refused from then on, and
// a tenant created again with the code gets a new account. An account never made, or
// made for another owner (another tenant of the code: an EvaTenant beside a tenant
// file), is not owner's to close: done.
func (a *Accounts) Close(ctx context.Context, code, owner string) error {
	acct, err := a.account(ctx, code)
	if err != nil || acct == nil || !acct.ownedBy(owner) {
		return err
	}
	pub, _ := acct.key.PublicKey()
	a.retireClient(code)
	if err := a.push(ctx, code, pub, natsaccount.Closed, map[string]time.Time{jwt.All: a.now()}); err != nil {
		return err
	}
	if err := a.Client.Delete(ctx, acct.secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the account key of %s: %w", code, err)
	}
	a.mu.Lock()
	delete(a.pushed, code)
	delete(a.copies, code)
	delete(a.accounts, code)
	a.mu.Unlock()
	return nil
}

// RevokeWorkloads revokes the user the tenant's workloads hold (decommission, direct
// mode): they have no business on the bus any more, and their connections, up to the
// tier's from wherever the credentials were taken, would keep the operator out of the
// account whose streams it deletes. The server cuts them. The key Secret records the
// revocation, so later pushes keep it, and no workload user: should the tenant be made
// Active again, Ensure issues a new one.
func (a *Accounts) RevokeWorkloads(ctx context.Context, code, owner string, limits natsaccount.Limits) error {
	acct, err := a.account(ctx, code)
	if err != nil || acct == nil || !acct.ownedBy(owner) {
		return err
	}
	if acct.workload != "" {
		acct.revoked[acct.workload] = a.now()
		revoked, err := json.Marshal(unixTimes(acct.revoked))
		if err != nil {
			return err
		}
		acct.secret.Data[revokedKey] = revoked
		delete(acct.secret.Annotations, annotationWorkloadUser)
		delete(acct.secret.Data, workloadCredsKey)
		acct.workload = ""
		if err := a.Client.Update(ctx, acct.secret); err != nil {
			a.forget(code)
			return fmt.Errorf("%w of %s: recording its workloads' user revoked: %w", errAccount, code, err)
		}
		a.remember(code, acct)
	}
	pub, _ := acct.key.PublicKey()
	return a.push(ctx, code, pub, limits, acct.revoked)
}

// CutOffWorkloads revokes the user the tenant's workloads hold and issues a new one
// (decommission, NACK mode), and returns its credentials, which NACK deletes the
// streams with once they are written to the tenant's Secret (WriteCreds). Whoever took
// the old credentials, from wherever, held up to the tier's connections: NACK, which
// connects when it has work and lets go after, would be kept out, the streams never
// deleted, the account never closed. The server cuts them. The workloads still running
// may read the new credentials from their mount, but the decommission removes them
// next. Done once per decommission: the user issued is recorded (annotationCutOff), and
// a rotation request cannot stand for it. An account never made, or another owner's, is
// left alone: nil credentials.
func (a *Accounts) CutOffWorkloads(ctx context.Context, code, owner string, limits natsaccount.Limits) ([]byte, error) {
	acct, err := a.account(ctx, code)
	if err != nil || acct == nil || !acct.ownedBy(owner) {
		return nil, err
	}
	if acct.workload == "" || acct.secret.Annotations[annotationCutOff] != acct.workload {
		rotation := acct.secret.Annotations[annotationRotation]
		if _, err := a.issueWorkloadCreds(ctx, code, acct, rotation, true); err != nil {
			return nil, err
		}
	}
	pub, _ := acct.key.PublicKey()
	if err := a.push(ctx, code, pub, limits, acct.revoked); err != nil {
		return nil, err
	}
	return acct.secret.Data[workloadCredsKey], nil
}
