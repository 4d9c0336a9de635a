package messaging

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

func embedded(t *testing.T, port int, dir string) *server.Server {
	return testenv.StartNATS(t, port, dir)
}

var limits = tenant.StreamLimits{MaxMsgs: 1000, MaxBytes: 1 << 20, MaxAge: metav1.Duration{Duration: time.Hour}, Replicas: 1}

func connect(t *testing.T, url string) *Client {
	t.Helper()
	c, err := Connect(Config{URL: url, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestEnsureIsIdempotentAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	s := embedded(t, -1, t.TempDir())
	c := connect(t, s.ClientURL())
	for i, want := range []Outcome{Created, Unchanged} {
		for _, spec := range TenantStreams("ISOLAA", limits) {
			got, err := c.Ensure(ctx, spec)
			if err != nil || got != want {
				t.Fatalf("ensure %d of %s: %s %v, want %s", i, spec.Name, got, err, want)
			}
		}
	}
	// A restarted operator (a new connection) finds them and creates nothing.
	c2 := connect(t, s.ClientURL())
	for _, spec := range TenantStreams("ISOLAA", limits) {
		if got, err := c2.Ensure(ctx, spec); err != nil || got != Unchanged {
			t.Fatalf("after restart: %s %v", got, err)
		}
	}
	// Changed limits are updated.
	bigger := limits
	bigger.MaxMsgs = 5000
	spec := TenantStreams("ISOLAA", bigger)[0]
	if got, err := c2.Ensure(ctx, spec); err != nil || got != Updated {
		t.Fatalf("changed limits: %s %v", got, err)
	}
	st, _ := c2.js.Stream(ctx, spec.Name)
	info, _ := st.Info(ctx)
	if info.Config.MaxMsgs != 5000 {
		t.Fatalf("MaxMsgs %d after update", info.Config.MaxMsgs)
	}
	// Deletion is idempotent.
	for range 2 {
		if err := c2.Delete(ctx, spec.Name); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := c2.Exists(ctx, spec.Name); ok || err != nil {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
}

func TestTenantIsolationAndDepth(t *testing.T) {
	ctx := context.Background()
	s := embedded(t, -1, t.TempDir())
	c := connect(t, s.ClientURL())
	for _, code := range []string{"TENANA", "TENANB"} {
		for _, spec := range TenantStreams(code, limits) {
			if _, err := c.Ensure(ctx, spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for i := range 7 {
		if _, err := js.Publish(ctx, fmt.Sprintf("capsule.TENANA.events.order.%d", i), []byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, fmt.Sprintf("capsule.TENANB.events.order.%d", i), []byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	// A's consumer sees exactly A's messages.
	cons, err := js.CreateOrUpdateConsumer(ctx, tenant.EventsStream("TENANA"), jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(20, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for msg := range batch.Messages() {
		n++
		if string(msg.Data()) != "a" {
			t.Fatalf("tenant A's consumer received %q from %s", msg.Data(), msg.Subject())
		}
		_ = msg.Ack()
	}
	if n != 7 {
		t.Fatalf("A's consumer received %d messages, want 7", n)
	}
	if d, err := c.Depth(ctx, tenant.EventsStream("TENANB")); err != nil || d != 3 {
		t.Fatalf("depth of B's events: %d %v, want 3", d, err)
	}
}

func TestOutageIsUnavailableAndRecovers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := embedded(t, -1, dir)
	url := s.ClientURL()
	c := connect(t, url)
	spec := TenantStreams("OUTAGE", limits)[0]
	if _, err := c.Ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	hostPort := s.Addr().String()
	s.Shutdown()
	s.WaitForShutdown()
	_, err := c.Ensure(ctx, TenantStreams("OUTAGE", limits)[1])
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ensure during an outage: %v, want ErrUnavailable", err)
	}
	var p int
	if _, err := fmt.Sscanf(hostPort[len("127.0.0.1:"):], "%d", &p); err != nil {
		t.Fatalf("port of %q: %v", hostPort, err)
	}
	embedded(t, p, dir)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := c.Ensure(ctx, TenantStreams("OUTAGE", limits)[1])
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after NATS came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ok, err := c.Exists(ctx, spec.Name); !ok || err != nil {
		t.Fatalf("the stream created before the outage is gone: %v %v", ok, err)
	}
}
