package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartEnvironment starts envtest's API server and etcd with ControlPlaneEnv (envtest
// gives them the test process's environment, so GOGC is set for the start alone), and
// a reaper that kills both with SIGKILL should the test process die without stopping
// them: envtest starts them without a parent-death signal, so a test killed by a
// timeout or by hand used to leave its control plane running, taking CPU from every
// later run on the machine. stop stops the control plane and the reaper.
func StartEnvironment(e *envtest.Environment) (cfg *rest.Config, stop func() error, err error) {
	if env := ControlPlaneEnv(); len(env) > 0 {
		_ = os.Setenv("GOGC", ControlPlaneGOGC)
		defer os.Unsetenv("GOGC")
	}
	before, err := childPIDs()
	if err != nil {
		return nil, nil, err
	}
	if cfg, err = e.Start(); err != nil {
		return nil, nil, err
	}
	after, err := childPIDs()
	var reaper *exec.Cmd
	if err == nil {
		reaper, err = startReaper(slices.DeleteFunc(after, func(pid int) bool { return slices.Contains(before, pid) }))
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("guarding the control plane: %w", err), e.Stop())
	}
	return cfg, func() error {
		_ = syscall.Kill(-reaper.Process.Pid, syscall.SIGKILL)
		_ = reaper.Wait()
		return e.Stop()
	}, nil
}

// childPIDs lists the test process's child processes (every thread's: a process is
// the child of the thread that started it).
func childPIDs() ([]int, error) {
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("listing child processes: no /proc/self/task/*/children (%v)", err)
	}
	var pids []int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has exited
		}
		for _, field := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// reaperScript waits until it is sent SIGTERM, which the kernel sends when the test
// process dies (the parent-death signal), then kills the processes it was given. It
// says "ready" once its trap is set: a SIGTERM before that would end it without a kill.
const reaperScript = `trap 'kill -KILL "$@" $! 2>/dev/null; exit 0' TERM
echo ready
while :; do sleep 86400 & wait $!; done`

// startReaper starts the reaper of pids, in a process group of its own (stopped by
// killing the group, its sleep included), and returns once it is ready.
func startReaper(pids []int) (*exec.Cmd, error) {
	args := []string{"-c", reaperScript, "eva-control-plane-reaper"}
	for _, pid := range pids {
		args = append(args, strconv.Itoa(pid))
	}
	cmd := exec.Command("sh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the control plane's reaper: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("the control plane's reaper did not start: %q, %v", line, err)
	}
	return cmd, nil
}
