package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// The ports handed to child processes (a Flux controller's metrics address, a
// kube-controller-manager's secure port, an operator's probe address) are chosen
// here, once, for every test process.
//
// A port asked of the kernel with ":0" and closed again comes from the ephemeral
// range, the range outgoing connections take their source ports from: between the
// moment it is closed and the moment the child binds it, any of the test's thousands
// of connections to the API server can take it, and the child then fails with
// "address already in use" (CI, session 17: kustomize-controller's metrics port).
// The kernel may also hand the same closed port to the very next ":0" asked in this
// process. So ports are picked at random below the ephemeral range, checked free by
// binding them, and never handed out twice by one process.
var ports struct {
	sync.Mutex
	given map[int]bool
}

// portFloor is the lowest port picked; nothing in these tests binds a fixed port
// between it and the ephemeral range.
const portFloor = 20000

// Port returns a TCP port on 127.0.0.1 that is free now, lies outside the kernel's
// ephemeral range where it can, and has not been returned before by this process.
func Port() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
	}
	lo, hi := portFloor, ephemeralLow()
	for range 200 {
		port := 0
		if hi > lo {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !ports.given[port] {
			ports.given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free TCP port on 127.0.0.1 in 200 tries between %d and %d", lo, hi)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768, its default, where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}
