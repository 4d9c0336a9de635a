package natsaccount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// jszSubject asks every server of the system account for its JetStream report (JSZ).
const jszSubject = "$SYS.REQ.SERVER.PING.JSZ"

// depthsPage is how many accounts one JSZ answer reports: a server answers with every
// stream of each, and an answer has to fit the system account's payload limit (1 MiB by
// default; a tenant's two streams take under 1 KiB).
const depthsPage = 256

// Depths are the messages each stream holds, by the public key of the account it lives
// in, then by stream name: a stream is a tenant's only in the tenant's own account (any
// account may name a stream eva-<CODE>-events).
type Depths map[string]map[string]uint64

// jszRequest is the JSZ request: the accounts' streams, each reported by its leader
// alone (a stream of three replicas is counted once), a page at a time.
type jszRequest struct {
	Accounts         bool `json:"accounts"`
	Streams          bool `json:"streams"`
	StreamLeaderOnly bool `json:"stream_leader_only"`
	Offset           int  `json:"offset"`
	Limit            int  `json:"limit"`
}

// jszAnswer is what one server answers, the fields Eva reads.
type jszAnswer struct {
	Data *struct {
		Disabled bool `json:"disabled"`
		Meta     *struct {
			Size int `json:"cluster_size"`
		} `json:"meta_cluster"`
		Accounts []struct {
			ID      string `json:"id"`
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	} `json:"data"`
	Error *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// ReadDepths reads how many messages every account's streams hold, as a user of the
// system account (conn): one JSZ request per page of accounts, answered by every server
// with JetStream. A clustered server says how many servers the JetStream cluster has, so
// a page is complete once that many have answered; a lone server's answer is the whole
// page. Servers that have not all answered within timeout leave their streams out, and
// the error says so; the depths read are returned with it.
func ReadDepths(ctx context.Context, conn *nats.Conn, timeout time.Duration) (Depths, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	depths := Depths{}
	for offset := 0; ; offset += depthsPage {
		full, err := readDepthsPage(ctx, conn, timeout, offset, depths)
		if err != nil || !full {
			return depths, err
		}
	}
}

// readDepthsPage reads one page of accounts from every server into depths, and reports
// whether a server's page was full (there may be more).
func readDepthsPage(ctx context.Context, conn *nats.Conn, timeout time.Duration, offset int, depths Depths) (bool, error) {
	req, err := json.Marshal(jszRequest{Accounts: true, Streams: true, StreamLeaderOnly: true, Offset: offset, Limit: depthsPage})
	if err != nil {
		return false, err
	}
	inbox := conn.NewInbox()
	answers, err := conn.SubscribeSync(inbox)
	if err != nil {
		return false, fmt.Errorf("reading stream depths: %w", err)
	}
	defer func() { _ = answers.Unsubscribe() }()
	if err := conn.PublishRequest(jszSubject, inbox, req); err != nil {
		return false, fmt.Errorf("reading stream depths: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full, answered, want := false, 0, 1
	for answered < want {
		msg, err := answers.NextMsgWithContext(ctx)
		if err != nil {
			return full, fmt.Errorf("reading stream depths: %d of %d NATS server(s) answered %s within %s: %w",
				answered, want, jszSubject, timeout, err)
		}
		var a jszAnswer
		if err := json.Unmarshal(msg.Data, &a); err != nil {
			return full, fmt.Errorf("reading stream depths: the answer to %s is not a JSZ report: %w", jszSubject, err)
		}
		switch {
		case a.Error != nil:
			return full, fmt.Errorf("reading stream depths: %s (code %d)", a.Error.Description, a.Error.Code)
		case a.Data == nil:
			return full, errors.New("reading stream depths: an answer to " + jszSubject + " without a report")
		case a.Data.Disabled:
			continue // a server without JetStream holds no stream and is no peer
		}
		if a.Data.Meta != nil {
			want = max(want, a.Data.Meta.Size)
		}
		answered++
		full = full || len(a.Data.Accounts) == depthsPage
		for _, acc := range a.Data.Accounts {
			for _, s := range acc.Streams {
				if depths[acc.ID] == nil {
					depths[acc.ID] = map[string]uint64{}
				}
				depths[acc.ID][s.Name] = s.State.Msgs
			}
		}
	}
	return full, nil
}
