package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// natsChildEnv names the environment variable that makes a re-executed test binary a
// NATS server (NATSChild): "plain" or "operator"; natsChildDirEnv is its directory.
const (
	natsChildEnv    = "EVA_TESTENV_NATS_CHILD"
	natsChildDirEnv = "EVA_TESTENV_NATS_DIR"
)

// natsChildReady is what the child writes to ready.json in its directory once it takes
// connections: where it listens and, in operator mode, the keys a platform gives Eva.
type natsChildReady struct {
	URL           string `json:"url"`
	SignerSeed    string `json:"signerSeed,omitempty"`
	SystemCreds   string `json:"systemCreds,omitempty"`
	SystemAccount string `json:"systemAccount,omitempty"`
}

// NATSProcess is a NATS server in a process of its own, as a platform runs it: the
// test binary re-executed (StartNATSProcess), so that a benchmark counts the server's
// CPU apart from the operator's. In operator mode OperatorNATS holds its keys (its
// Server is nil: the server is in the other process).
type NATSProcess struct {
	*Process
	OperatorNATS
}

// NATSChild runs the process as the NATS server StartNATSProcess asked for, if it did:
// it serves until killed and never returns. A TestMain calls it first; in any other
// process it returns at once.
func NATSChild() {
	mode, dir := os.Getenv(natsChildEnv), os.Getenv(natsChildDirEnv)
	if mode == "" {
		return
	}
	if err := serveNATSChild(mode, dir); err != nil {
		fmt.Fprintln(os.Stderr, "nats child:", err)
		os.Exit(1)
	}
	select {}
}

func serveNATSChild(mode, dir string) error {
	var ready natsChildReady
	switch mode {
	case "plain":
		s, err := RunNATS(server.RANDOM_PORT, filepath.Join(dir, "store"))
		if err != nil {
			return err
		}
		ready.URL = s.ClientURL()
	case "operator":
		n, err := RunNATSOperator(dir)
		if err != nil {
			return err
		}
		seed, err := n.OperatorSigner.Seed()
		if err != nil {
			return err
		}
		ready = natsChildReady{URL: n.URL, SignerSeed: string(seed), SystemCreds: n.SystemCreds, SystemAccount: n.SystemAccount}
	default:
		return fmt.Errorf("%s=%q: want plain or operator", natsChildEnv, mode)
	}
	data, err := json.Marshal(ready)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "ready.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "ready.json"))
}

// StartNATSProcess starts a NATS server (in operator mode with a full resolver, or
// plain, with JetStream either way) in a child process for one test or benchmark,
// killed when it ends. The test binary's TestMain must call NATSChild first.
func StartNATSProcess(t testing.TB, operator bool) *NATSProcess {
	t.Helper()
	dir := t.TempDir()
	mode := "plain"
	if operator {
		mode = "operator"
	}
	p, err := StartProcess("nats-server", os.Args[0], dir,
		[]string{natsChildEnv + "=" + mode, natsChildDirEnv + "=" + dir}, "-test.run=^$", "-test.bench=^$")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	ready, err := waitNATSChild(p, filepath.Join(dir, "ready.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := &NATSProcess{Process: p, OperatorNATS: OperatorNATS{URL: ready.URL, SystemCreds: ready.SystemCreds,
		SystemAccount: ready.SystemAccount}}
	if operator {
		if n.OperatorSigner, err = nkeys.FromSeed([]byte(ready.SignerSeed)); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// waitNATSChild waits, for at most 20 seconds, until the child wrote where it listens.
func waitNATSChild(p *Process, path string) (natsChildReady, error) {
	var ready natsChildReady
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			if p.Exited() {
				return ready, fmt.Errorf("the NATS child exited: %s", p.Tail(2000))
			}
			continue
		}
		if err != nil {
			return ready, err
		}
		return ready, json.Unmarshal(data, &ready)
	}
	return ready, fmt.Errorf("the NATS child did not start in 20s: %s", p.Tail(2000))
}
