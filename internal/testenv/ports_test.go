package testenv

import (
	"net"
	"strconv"
	"testing"
)

// TestPortsAreDistinctAndOutsideTheEphemeralRange asks for many ports and binds each:
// none repeats, none lies in the range outgoing connections take their source ports
// from, and each is free when returned.
func TestPortsAreDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= portFloor {
		t.Skipf("ephemeral range starts at %d: no room below it", low)
	}
	seen := map[int]bool{}
	for range 500 {
		port, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d returned twice", port)
		}
		seen[port] = true
		if port < portFloor || port >= low {
			t.Fatalf("port %d is outside [%d, %d)", port, portFloor, low)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		_ = l.Close()
	}
}
