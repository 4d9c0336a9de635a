package testenv

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// OperatorServiceAccount is the identity the deployed operator runs as (base/manager);
// process tests impersonate it so the operator works with exactly the RBAC and the
// admission policy a cluster gives it.
const OperatorServiceAccount = "system:serviceaccount:eva-system:eva-operator"

// OperatorBinary builds cmd/eva-operator, as a user builds it, into
// bin/eva-operator-test (see Binary) and returns its path.
func OperatorBinary(t testing.TB) string {
	t.Helper()
	path, err := Binary("./cmd/eva-operator", "eva-operator-test")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeConfigAs writes a kubeconfig for the API server that impersonates user (with the
// groups a service account has when user is one) and returns its path.
func (e *Env) KubeConfigAs(t testing.TB, user string) string {
	t.Helper()
	cfg, err := clientcmd.Load(e.KubeConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = user
		auth.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:eva-system", "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartOperator starts the operator binary with args and extra environment variables
// (OPERATOR_VERSION, POD_NAMESPACE, ...). It is killed with SIGKILL when the test ends,
// whatever happened; its output is logged on failure.
func StartOperator(t testing.TB, kubeconfig string, env []string, args ...string) *Process {
	t.Helper()
	p, err := StartProcess("eva-operator", OperatorBinary(t), RepoRoot(), append([]string{"KUBECONFIG=" + kubeconfig}, env...), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("eva-operator %v output:\n%s", args, p.Output())
		}
	})
	return p
}

// FreePort returns a free TCP port on 127.0.0.1 for a child process to bind (Port).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// WaitListening waits until addr accepts TCP connections.
func WaitListening(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not listening within %s", addr, timeout)
}
