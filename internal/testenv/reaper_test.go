package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// reaperChildEnv makes the test binary the child of TestControlPlaneDiesWithTheTest.
const reaperChildEnv = "EVA_TESTENV_REAPER_CHILD"

// TestControlPlaneDiesWithTheTest starts a control plane in a child test process, kills
// that process with SIGKILL (as go test's timeout or a person does), and requires its
// kube-apiserver and etcd to be gone soon after: nothing of a killed test goes on
// taking CPU from the next.
func TestControlPlaneDiesWithTheTest(t *testing.T) {
	if os.Getenv(reaperChildEnv) != "" {
		t.Skip("the child's own run")
	}
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestHelperControlPlane$", "-test.v")
	child.Env = append(os.Environ(), reaperChildEnv+"=1", "KUBEBUILDER_ASSETS="+assets)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	var pids []int
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(lines.Text()), "control plane:"); ok {
			for _, f := range strings.Fields(rest) {
				pid, _ := strconv.Atoi(f)
				pids = append(pids, pid)
			}
			break
		}
	}
	if len(pids) != 2 {
		t.Fatalf("the child reported control plane processes %v, want kube-apiserver and etcd", pids)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Fatalf("%s (pid %d) still runs 20 s after its test process was killed", command(pid), pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestHelperControlPlane is the child of TestControlPlaneDiesWithTheTest: it starts a
// control plane, prints its processes and waits to be killed.
func TestHelperControlPlane(t *testing.T) {
	if os.Getenv(reaperChildEnv) == "" {
		t.Skip("run by TestControlPlaneDiesWithTheTest")
	}
	before, err := childPIDs()
	if err != nil {
		t.Fatal(err)
	}
	e := &envtest.Environment{BinaryAssetsDirectory: os.Getenv("KUBEBUILDER_ASSETS")}
	if _, _, err := StartEnvironment(e); err != nil {
		t.Fatal(err)
	}
	after, err := childPIDs()
	if err != nil {
		t.Fatal(err)
	}
	var plane []string
	for _, pid := range after {
		if c := command(pid); c == "kube-apiserver" || c == "etcd" {
			if !slices.Contains(before, pid) {
				plane = append(plane, strconv.Itoa(pid))
			}
		}
	}
	fmt.Println("control plane:", strings.Join(plane, " "))
	time.Sleep(time.Minute)
}

// command is a process's command name, "" once it is gone.
func command(pid int) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// alive says whether pid is a process that has not exited (a zombie nobody reaped
// has exited).
func alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
