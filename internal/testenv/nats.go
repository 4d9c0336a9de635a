package testenv

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// RunNATS starts an embedded NATS server with JetStream on 127.0.0.1 and waits until it
// accepts connections: port -1 picks a free port; a fixed port and store folder let a
// test stop the server and bring the same one back. JetStream reserves each stream's
// maxBytes against its storage limit, and the tiers' limits are sized for production
// (up to 20 GiB a stream) while tests write next to nothing, so the limit is set far
// above this machine's disk instead of JetStream's default (75% of the free disk).
func RunNATS(port int, storeDir string) (*server.Server, error) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir,
		JetStreamMaxStore: 1 << 50, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("NATS did not start")
	}
	return s, nil
}

// StartNATS is RunNATS for one test: the server stops when the test ends.
func StartNATS(t testing.TB, port int, storeDir string) *server.Server {
	t.Helper()
	s, err := RunNATS(port, storeDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}
