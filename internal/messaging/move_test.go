package messaging

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestMoveCarriesEveryMessageOnce: a tenant's stream in the shared account moves into
// its own (another server here), every message once, oldest first, with its subject and
// headers (not the directives the shared stream judged it by), though the move before
// was cut short just after publishing its first message; the emptied stream is deleted, and moving again moves nothing.
func TestMoveCarriesEveryMessageOnce(t *testing.T) {
	ctx := context.Background()
	shared := connect(t, embedded(t, -1, t.TempDir()).ClientURL())
	own := connect(t, embedded(t, -1, t.TempDir()).ClientURL())
	spec := TenantStreams("MOVEAA", limits)[0]
	for _, c := range []*Client{shared, own} {
		if _, err := c.Ensure(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		msg := &nats.Msg{Subject: fmt.Sprintf("capsule.MOVEAA.events.order%d", i), Data: []byte{byte(i)}, Header: nats.Header{"Order": []string{fmt.Sprint(i)}}}
		// Directives of the shared stream, stored with the messages: message 3 expects
		// message 2's id last, which the tenant's stream never holds.
		switch i {
		case 2:
			msg.Header.Set(jetstream.MsgIDHeader, "orig-2")
		case 3:
			msg.Header.Set(jetstream.ExpectedLastMsgIDHeader, "orig-2")
		}
		if _, err := shared.js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// The cut-short move: message 1 published into the tenant's account, not yet
	// deleted from the shared one.
	stream, _ := shared.js.Stream(ctx, spec.Name)
	first, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := own.republish(ctx, spec.Name, first); err != nil {
		t.Fatal(err)
	}

	moved, err := shared.Move(ctx, own, spec.Name)
	if err != nil || moved != 5 {
		t.Fatalf("moved %d, %v; want 5", moved, err)
	}
	dest, _ := own.js.Stream(ctx, spec.Name)
	info, _ := dest.Info(ctx)
	if info.State.Msgs != 5 {
		t.Errorf("the tenant's stream holds %d messages, want 5 (each once)", info.State.Msgs)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := dest.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		i := int(seq - 1)
		if m.Subject != fmt.Sprintf("capsule.MOVEAA.events.order%d", i) || m.Header.Get("Order") != fmt.Sprint(i) || m.Data[0] != byte(i) {
			t.Errorf("message %d: %s %v %v, want order %d", seq, m.Subject, m.Header, m.Data, i)
		}
	}
	if ok, err := shared.Exists(ctx, spec.Name); ok || err != nil {
		t.Errorf("the shared stream after the move: exists %v, %v", ok, err)
	}
	if moved, err := shared.Move(ctx, own, spec.Name); moved != 0 || err != nil {
		t.Errorf("moving again: %d, %v", moved, err)
	}
}
