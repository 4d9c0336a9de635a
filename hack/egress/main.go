// Command egress runs a command inside a network namespace of its own and proves that
// nothing in it tried to leave the machine: loopback works as usual; every other
// destination is routed into a veth pair whose packet counter must stay at zero; the
// machine's DNS resolvers answer nothing but count (and name) every query made to them.
// It exits non-zero when the command fails, when a packet left, or when a name was
// looked up. `make test` runs the end-to-end suite under it.
//
//	go run ./hack/egress [-report out/egress.json] -- go test ./internal/e2e/...
//
// Where a network namespace cannot be made (no unshare, no user namespaces), the command
// runs as it is and the report says the check was skipped and why; with
// EVA_EGRESS_REQUIRED=1 (or -require) that is a failure instead.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// insideEnv marks the process re-executed inside the namespace.
const insideEnv = "EVA_EGRESS_NETNS"

// The veth pair every non-loopback route leads into, and its addresses.
const (
	egressLink  = "eva-egress0"
	peerLink    = "eva-egress1"
	egressAddr  = "10.254.254.1/30"
	gatewayAddr = "10.254.254.2"
)

// Report is what a run found.
type Report struct {
	Command []string `json:"command"`
	// Skipped says why the check did not run (empty when it did).
	Skipped string `json:"skipped,omitempty"`
	// PacketsOut counts the packets sent (or dropped on the way out) on the only
	// non-loopback route; DNSQueries lists each name asked of the resolvers.
	PacketsOut uint64   `json:"packetsOut"`
	DNSQueries []string `json:"dnsQueries"`
	Resolvers  []string `json:"resolvers"`
	ExitCode   int      `json:"exitCode"`
	Seconds    float64  `json:"seconds"`
}

func main() {
	report := flag.String("report", "", "write the report as JSON to this file")
	require := flag.Bool("require", os.Getenv("EVA_EGRESS_REQUIRED") == "1", "fail when the check cannot run here (default from EVA_EGRESS_REQUIRED=1)")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: egress [-report FILE] -- COMMAND [ARGS...]")
		os.Exit(2)
	}
	var r *Report
	var err error
	if os.Getenv(insideEnv) == "1" {
		r, err = runInside(args)
	} else if reason := namespaceUnavailable(); reason != "" && *require {
		fmt.Fprintf(os.Stderr, "egress: the zero-egress check is required and cannot run here: %s\n", reason)
		os.Exit(1)
	} else if reason != "" {
		fmt.Fprintf(os.Stderr, "egress: zero-egress check SKIPPED: %s; running the command without it\n", reason)
		r = &Report{Command: args, Skipped: reason}
		r.ExitCode, err = run(args, childEnv())
	} else {
		// Re-run this program as root of a new user namespace with a new network
		// namespace; the report comes back through the file.
		code, rerr := run(append([]string{"unshare", "--net", "--map-root-user", "--", os.Args[0]}, os.Args[1:]...),
			append(childEnv(), insideEnv+"=1"))
		if rerr != nil {
			fmt.Fprintln(os.Stderr, "egress:", rerr)
			os.Exit(1)
		}
		os.Exit(code)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "egress:", err)
		os.Exit(1)
	}
	if r.Skipped == "" && r.DNSQueries == nil {
		r.DNSQueries = []string{}
	}
	if *report != "" {
		data, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(*report, append(data, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "egress:", err)
		}
	}
	code := r.ExitCode
	if r.Skipped == "" {
		fmt.Fprintf(os.Stderr, "egress: %d packet(s) left the namespace, %d DNS quer(ies) in %.0fs of %s\n",
			r.PacketsOut, len(r.DNSQueries), r.Seconds, strings.Join(args, " "))
		if r.PacketsOut > 0 || len(r.DNSQueries) > 0 {
			fmt.Fprintf(os.Stderr, "egress: FAIL: something tried to leave the machine (names looked up: %v)\n", r.DNSQueries)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// namespaceUnavailable says why a user and network namespace cannot be made here, or "".
func namespaceUnavailable() string {
	if _, err := exec.LookPath("unshare"); err != nil {
		return "no unshare command (util-linux)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (iproute2)"
	}
	out, err := exec.Command("unshare", "--net", "--map-root-user", "--", "ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("cannot make a network namespace with a veth pair: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return ""
}

// runInside sets the namespace up, runs the command and reads the counters.
func runInside(args []string) (*Report, error) {
	r := &Report{Command: args, DNSQueries: []string{}}
	// IPv6 off before any link is up: a link would send its own router solicitations;
	// a v6 destination is then unreachable at once (not counted), and reaching one by
	// name needs a DNS query, which is.
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/disable_ipv6", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("turning IPv6 off in the namespace: %w", err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0o644); err != nil {
		return nil, fmt.Errorf("turning IPv6 off in the namespace: %w", err)
	}
	for _, step := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", egressLink, "type", "veth", "peer", "name", peerLink},
		{"addr", "add", egressAddr, "dev", egressLink},
		{"link", "set", peerLink, "up"},
		{"link", "set", egressLink, "up"},
		{"route", "add", "default", "via", gatewayAddr, "dev", egressLink},
	} {
		if out, err := exec.Command("ip", step...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(step, " "), err, out)
		}
	}
	// The gateway's address is known, so no ARP request is needed (nor counted): any
	// packet on the link is one the command sent.
	mac, err := linkAddress(peerLink)
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("ip", "neigh", "add", gatewayAddr, "lladdr", mac, "dev", egressLink, "nud", "permanent").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip neigh: %v: %s", err, out)
	}
	resolvers, err := startResolvers()
	if err != nil {
		return nil, err
	}
	r.Resolvers = resolvers.addrs
	before, err := packetsOut()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	r.ExitCode, err = run(args, childEnv())
	if err != nil {
		return nil, err
	}
	r.Seconds = time.Since(start).Seconds()
	r.DNSQueries = resolvers.stop()
	after, err := packetsOut()
	if err != nil {
		return nil, err
	}
	r.PacketsOut = after - before
	return r, nil
}

// linkAddress is a link's MAC address.
func linkAddress(link string) (string, error) {
	out, err := exec.Command("ip", "-j", "link", "show", "dev", link).Output()
	if err != nil {
		return "", fmt.Errorf("ip link show %s: %w", link, err)
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return "", fmt.Errorf("ip link show %s: %q", link, out)
	}
	return links[0].Address, nil
}

// packetsOut reads the egress link's sent and dropped-on-send packet counters, through
// netlink (sysfs would show the host's links).
func packetsOut() (uint64, error) {
	out, err := exec.Command("ip", "-j", "-s", "link", "show", "dev", egressLink).Output()
	if err != nil {
		return 0, fmt.Errorf("ip -s link show %s: %w", egressLink, err)
	}
	var links []struct {
		Stats struct {
			TX struct {
				Packets uint64 `json:"packets"`
				Dropped uint64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("ip -s link show %s: %q", egressLink, out)
	}
	return links[0].Stats.TX.Packets + links[0].Stats.TX.Dropped, nil
}

// resolvers are the stand-in DNS servers: they answer nothing and record every query.
type resolvers struct {
	addrs     []string
	mu        sync.Mutex
	queries   []string
	listeners []io.Closer
	wg        sync.WaitGroup
}

func (rs *resolvers) record(name string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.queries = append(rs.queries, name)
}

// stop closes the listeners, waits for their goroutines and returns every query seen.
func (rs *resolvers) stop() []string {
	for _, l := range rs.listeners {
		_ = l.Close()
	}
	rs.wg.Wait()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]string{}, rs.queries...)
}

// startResolvers puts each IPv4 resolver of /etc/resolv.conf on loopback, and always
// 127.0.0.1 (where Go and glibc look without a resolv.conf), and answers nothing there,
// recording the name of every query (UDP and TCP). IPv6 resolvers are unreachable (IPv6
// is off).
func startResolvers() (*resolvers, error) {
	rs := &resolvers{}
	candidates := []string{"127.0.0.1"}
	f, err := os.Open("/etc/resolv.conf")
	switch {
	case err == nil:
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "nameserver" {
				candidates = append(candidates, fields[1])
			}
		}
		f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	seen := map[string]bool{}
	for _, candidate := range candidates {
		ip := net.ParseIP(candidate)
		if ip == nil || ip.To4() == nil || seen[ip.String()] {
			continue
		}
		seen[ip.String()] = true
		if !ip.IsLoopback() {
			if out, err := exec.Command("ip", "addr", "add", ip.String()+"/32", "dev", "lo").CombinedOutput(); err != nil {
				return nil, fmt.Errorf("putting resolver %s on loopback: %v: %s", ip, err, out)
			}
		}
		addr := net.JoinHostPort(ip.String(), "53")
		udp, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return nil, fmt.Errorf("listening as resolver %s: %w", addr, err)
		}
		rs.listeners = append(rs.listeners, udp)
		rs.wg.Add(2)
		go func() {
			defer rs.wg.Done()
			buf := make([]byte, 4096)
			for {
				n, _, err := udp.ReadFrom(buf)
				if err != nil {
					return
				}
				rs.record(queryName(buf[:n]))
			}
		}()
		tcp, err := net.Listen("tcp4", addr)
		if err != nil {
			return nil, fmt.Errorf("listening as resolver %s: %w", addr, err)
		}
		rs.listeners = append(rs.listeners, tcp)
		go func() {
			defer rs.wg.Done()
			for {
				c, err := tcp.Accept()
				if err != nil {
					return
				}
				buf := make([]byte, 4096)
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, _ := c.Read(buf)
				c.Close()
				if n > 2 {
					rs.record(queryName(buf[2:n]))
				} else {
					rs.record("(tcp connection)")
				}
			}
		}()
		rs.addrs = append(rs.addrs, ip.String())
	}
	return rs, nil
}

// childEnv is this process's environment without the marker of the namespace, so a
// command that runs egress again starts its own check.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, insideEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// queryName reads the first question's name of a DNS message.
func queryName(msg []byte) string {
	if len(msg) < 13 {
		return "(malformed query)"
	}
	var labels []string
	for i := 12; i < len(msg) && msg[i] != 0; {
		n := int(msg[i])
		if n > 63 || i+1+n > len(msg) {
			return "(malformed query)"
		}
		labels = append(labels, string(msg[i+1:i+1+n]))
		i += 1 + n
	}
	return strings.Join(labels, ".")
}

// run runs a command with the standard streams passed through and returns its exit
// code; a signal that kills it is a failure.
func run(args []string, env []string) (int, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdin, os.Stdout, os.Stderr, env
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	default:
		return 0, fmt.Errorf("running %s: %w", args[0], err)
	}
}
