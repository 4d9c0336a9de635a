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
		Total    int  `json:"total"`
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
// with JetStream. A clustered server says how many servers its JetStream cluster has
// (offline ones too); a lone server's answer is the whole page. A server that does not
// answer a page within timeout is not waited for again on the next pages, and a server's
// error is kept: the read goes on, its streams are left out (their depths keep their last
// value), and the error says so with the depths read.
func ReadDepths(ctx context.Context, conn *nats.Conn, timeout time.Duration) (Depths, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	depths := Depths{}
	var errs []error
	page := jszPage{want: 1}
	for offset := 0; ctx.Err() == nil; offset += depthsPage {
		page.more = false
		if err := page.read(ctx, conn, timeout, offset, depths); err != nil {
			errs = append(errs, err)
		}
		if !page.more {
			break
		}
	}
	return depths, errors.Join(append(errs, ctx.Err())...)
}

// jszPage is what the pages of one ReadDepths learn: how many servers answer, and
// whether a server holds accounts beyond the page read.
type jszPage struct {
	want int
	more bool
}

// read reads one page of accounts from every server into depths.
func (p *jszPage) read(ctx context.Context, conn *nats.Conn, timeout time.Duration, offset int, depths Depths) error {
	req, err := json.Marshal(jszRequest{Accounts: true, Streams: true, StreamLeaderOnly: true, Offset: offset, Limit: depthsPage})
	if err != nil {
		return err
	}
	inbox := conn.NewInbox()
	answers, err := conn.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("reading stream depths: %w", err)
	}
	defer func() { _ = answers.Unsubscribe() }()
	if err := conn.PublishRequest(jszSubject, inbox, req); err != nil {
		return fmt.Errorf("reading stream depths: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var errs []error
	for answered := 0; answered < p.want; {
		msg, err := answers.NextMsgWithContext(ctx)
		if err != nil {
			// The servers that did not answer are not waited for on the next pages.
			errs = append(errs, fmt.Errorf("reading stream depths: %d of %d NATS server(s) answered %s within %s: %w",
				answered, p.want, jszSubject, timeout, err))
			p.want = max(answered, 1)
			break
		}
		var a jszAnswer
		switch err := json.Unmarshal(msg.Data, &a); {
		case err != nil:
			errs = append(errs, fmt.Errorf("reading stream depths: the answer to %s is not a JSZ report: %w", jszSubject, err))
		case a.Error != nil:
			errs = append(errs, fmt.Errorf("reading stream depths: a server answered %s (code %d)", a.Error.Description, a.Error.Code))
		case a.Data == nil:
			errs = append(errs, errors.New("reading stream depths: an answer to "+jszSubject+" without a report"))
		case a.Data.Disabled:
			continue // a server without JetStream holds no stream and is no peer
		default:
			if a.Data.Meta != nil && offset == 0 {
				p.want = max(p.want, a.Data.Meta.Size)
			}
			p.more = p.more || offset+depthsPage < a.Data.Total
			a.record(depths)
		}
		answered++
	}
	return errors.Join(errs...)
}

// record adds the answer's streams to depths.
func (a *jszAnswer) record(depths Depths) {
	for _, acc := range a.Data.Accounts {
		for _, s := range acc.Streams {
			if depths[acc.ID] == nil {
				depths[acc.ID] = map[string]uint64{}
			}
			depths[acc.ID][s.Name] = s.State.Msgs
		}
	}
}
