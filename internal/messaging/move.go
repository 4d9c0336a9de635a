package messaging

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MoveIDPrefix begins the Nats-Msg-Id of every message Move publishes: eva-move-<seq>,
// the message's sequence in the stream it left.
const MoveIDPrefix = "eva-move-"

// Move moves every message of the stream name here into the stream of the same name in
// to (a tenant's own account: it must exist there), oldest first, then deletes the
// emptied stream here. Each message is published there with its subject, headers (but
// the server's Nats-* directives) and data, and a Nats-Msg-Id of its sequence here, then deleted here: this stream holds what
// is left to move, so a move cut short (a crash, NATS away) goes on where it stopped, and
// the one message published but not yet deleted is dropped there as a duplicate when
// published again within the stream's duplicate window. It returns how many messages it
// moved; a stream that is not here is nothing to move.
func (c *Client) Move(ctx context.Context, to *Client, name string) (int, error) {
	stream, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, c.wrap("reading stream "+name, err)
	}
	moved := 0
	for seq := uint64(1); ; {
		msg, err := c.next(ctx, stream, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return moved, c.wrap(fmt.Sprintf("reading message %d of stream %s", seq, name), err)
		}
		if err := to.republish(ctx, name, msg); err != nil {
			return moved, err
		}
		if err := c.deleteMsg(ctx, stream, msg.Sequence); err != nil {
			return moved, c.wrap(fmt.Sprintf("deleting message %d of stream %s", msg.Sequence, name), err)
		}
		moved++
		seq = msg.Sequence + 1
	}
	return moved, c.Delete(ctx, name)
}

// next reads the first message of the stream at seq or after.
func (c *Client) next(ctx context.Context, stream jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
}

func (c *Client) deleteMsg(ctx context.Context, stream jetstream.Stream, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := stream.DeleteMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	return err
}

// republish publishes a moved message into the stream name, acknowledged by it.
func (c *Client) republish(ctx context.Context, name string, msg *jetstream.RawStreamMsg) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out := &nats.Msg{Subject: msg.Subject, Data: msg.Data, Header: nats.Header{}}
	for k, v := range msg.Header {
		// The server's directives a message was published with (Nats-Expected-*,
		// Nats-Msg-Id, Nats-Rollup, Nats-TTL, …) are stored with it: published again
		// into another stream they would be judged against that stream and refused.
		if !strings.HasPrefix(k, "Nats-") {
			out.Header[k] = v
		}
	}
	id := fmt.Sprintf("%s%d", MoveIDPrefix, msg.Sequence)
	if _, err := c.js.PublishMsg(ctx, out, jetstream.WithMsgID(id), jetstream.WithExpectStream(name)); err != nil {
		return c.wrap(fmt.Sprintf("publishing message %d of stream %s into the tenant's account", msg.Sequence, name), err)
	}
	return nil
}
