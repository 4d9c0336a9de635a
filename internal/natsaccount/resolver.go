package natsaccount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// The system account's subject a full resolver takes account JWTs on.
const claimsUpdateSubject = "$SYS.REQ.CLAIMS.UPDATE"

// ErrResolver is a push the resolver refused or did not answer: the account is not (or
// not yet) what Eva signed. Retried by the caller.
var ErrResolver = errors.New("the NATS account resolver did not take the account")

// Resolver pushes account JWTs to the NATS servers' full resolver, connected as a user
// of the system account.
type Resolver struct {
	Conn *nats.Conn
	// Timeout bounds one push (default 5s).
	Timeout time.Duration
}

// claimsResponse is what a server answers a claims update with.
type claimsResponse struct {
	Data *struct {
		Account string `json:"account"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"data"`
	Error *struct {
		Account     string `json:"account"`
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// Push sends the account JWT and waits for a server to take it. A server that refuses
// it (a JWT not signed by a trusted operator's key, a resolver that is not a full one)
// says why, and the error names that.
func (r *Resolver) Push(ctx context.Context, accountJWT string) error {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := r.Conn.RequestWithContext(ctx, claimsUpdateSubject, []byte(accountJWT))
	if err != nil {
		return fmt.Errorf("%w: pushing to %s: %w", ErrResolver, claimsUpdateSubject, err)
	}
	var resp claimsResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("%w: the answer to %s is not a claims response: %w", ErrResolver, claimsUpdateSubject, err)
	}
	switch {
	case resp.Error != nil:
		return fmt.Errorf("%w: account %s: %s (code %d)", ErrResolver, resp.Error.Account, resp.Error.Description, resp.Error.Code)
	case resp.Data == nil || resp.Data.Code != 200:
		return fmt.Errorf("%w: unexpected answer %s", ErrResolver, msg.Data)
	}
	return nil
}
