// Package messaging manages a tenant's JetStream streams with nats.go: ensure them
// (idempotently: a stream that exists is success, changed limits are updated), delete
// them (a missing stream is success), and read how many messages they hold.
package messaging

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aidonow/eva/internal/tenant"
)

// ErrUnavailable wraps every failure that means NATS (or JetStream) cannot be reached
// right now, as opposed to a refusal of what was asked.
var ErrUnavailable = errors.New("messaging unavailable")

// Config is how to reach NATS. Credentials and TLS material come from files.
type Config struct {
	URL       string
	CredsFile string
	CertFile  string
	KeyFile   string
	CAFile    string
	// Timeout bounds each JetStream request (default 5 s).
	Timeout time.Duration
}

// Client talks to one NATS deployment.
type Client struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration
}

// Connect connects to NATS. The connection reconnects by itself; requests made while it
// is down fail with ErrUnavailable.
func Connect(cfg Config) (*Client, error) {
	opts := []nats.Option{
		nats.Name("eva-operator"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.RetryOnFailedConnect(true),
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		opts = append(opts, nats.ClientCert(cfg.CertFile, cfg.KeyFile))
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to %s: %v", ErrUnavailable, cfg.URL, err)
	}
	return FromConn(nc, cfg.Timeout)
}

// FromConn is a Client over an established connection (a tenant account's user's, for
// one); timeout bounds each request (default 5 s). Close closes the connection.
func FromConn(nc *nats.Conn, timeout time.Duration) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Client{nc: nc, js: js, timeout: timeout}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// IsClosed reports whether the connection is closed for good.
func (c *Client) IsClosed() bool { return c.nc.IsClosed() }

// StreamSpec is one stream to ensure.
type StreamSpec struct {
	Name     string
	Subjects []string
	Limits   tenant.StreamLimits
}

// TenantStreams returns a tenant's two streams: events and commands, each capturing
// only the tenant's own subjects.
func TenantStreams(code string, limits tenant.StreamLimits) []StreamSpec {
	return []StreamSpec{
		{Name: tenant.EventsStream(code), Subjects: []string{tenant.EventsSubject(code)}, Limits: limits},
		{Name: tenant.CommandsStream(code), Subjects: []string{tenant.CommandsSubject(code)}, Limits: limits},
	}
}

func (s StreamSpec) config() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: s.Name, Subjects: s.Subjects,
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld, Storage: jetstream.FileStorage,
		MaxMsgs: s.Limits.MaxMsgs, MaxBytes: s.Limits.MaxBytes, MaxAge: s.Limits.MaxAge.Duration,
		Replicas: s.Limits.Replicas,
	}
}

// Outcome says what Ensure did.
type Outcome string

// The outcomes of Ensure.
const (
	Created   Outcome = "created"
	Updated   Outcome = "updated"
	Unchanged Outcome = "unchanged"
)

// Ensure makes the stream exist with the spec's subjects and limits. A stream that
// already exists (found, or JetStream error 10058 on create) is success; if its
// subjects or limits differ, it is updated.
func (c *Client) Ensure(ctx context.Context, s StreamSpec) (Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cfg := s.config()
	stream, err := c.js.Stream(ctx, s.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = c.js.CreateStream(ctx, cfg)
		if err == nil {
			return Created, nil
		}
		// Someone created it meanwhile (another operator, a restart): that is success,
		// and the limits are checked below.
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return "", c.wrap("creating stream "+s.Name, err)
		}
		stream, err = c.js.Stream(ctx, s.Name)
	}
	if err != nil {
		return "", c.wrap("reading stream "+s.Name, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return "", c.wrap("reading stream "+s.Name, err)
	}
	cur := info.Config
	if slices.Equal(cur.Subjects, cfg.Subjects) && cur.MaxMsgs == cfg.MaxMsgs && cur.MaxBytes == cfg.MaxBytes &&
		cur.MaxAge == cfg.MaxAge && cur.Replicas == cfg.Replicas {
		return Unchanged, nil
	}
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		return "", c.wrap("updating stream "+s.Name, err)
	}
	return Updated, nil
}

// Delete removes a stream; a stream that does not exist is success.
func (c *Client) Delete(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.js.DeleteStream(ctx, name)
	if err == nil || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return c.wrap("deleting stream "+name, err)
}

// Exists reports whether a stream exists.
func (c *Client) Exists(ctx context.Context, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	_, err := c.js.Stream(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return false, nil
	}
	return false, c.wrap("reading stream "+name, err)
}

// Depth returns how many messages a stream holds.
func (c *Client) Depth(ctx context.Context, name string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	stream, err := c.js.Stream(ctx, name)
	if err != nil {
		return 0, c.wrap("reading stream "+name, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, c.wrap("reading stream "+name, err)
	}
	return info.State.Msgs, nil
}

// wrap classifies an error: connection-level failures become ErrUnavailable.
func (c *Client) wrap(what string, err error) error {
	if !c.nc.IsConnected() || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrNoServers) {
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
