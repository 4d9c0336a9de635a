package testenv

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartNATS starts an embedded NATS server with JetStream on loopback: port -1 picks a
// free port; a fixed port and store folder let a test stop the server and bring the
// same one back. The server stops when the test ends.
func StartNATS(t testing.TB, port int, storeDir string) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: storeDir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}
