package testenv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Process is a program a test started: an operator binary, a controller of the test
// cluster. It runs in its own process group and is killed with SIGKILL (never asked to
// stop), also when the test process itself dies (parent-death signal).
type Process struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

// StartProcess starts bin with args in dir, with the test process's environment plus
// env, capturing its output.
func StartProcess(name, bin, dir string, env []string, args ...string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = lockedWriter{p}
	cmd.Stderr = lockedWriter{p}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Kill sends SIGKILL to the process group and waits for the process to exit: no
// graceful shutdown, whatever it was doing is cut short.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Output returns what the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Tail returns the last n bytes of the output, for failure messages.
func (p *Process) Tail(n int) string {
	out := p.Output()
	if len(out) > n {
		out = "…" + out[len(out)-n:]
	}
	return out
}

type lockedWriter struct{ p *Process }

var _ io.Writer = lockedWriter{}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

// PeakRSS returns the most memory the running process has held resident (VmHWM in
// /proc/<pid>/status), in bytes.
func (p *Process) PeakRSS() (int64, error) { return p.memoryField("VmHWM") }

// FileRSS returns the process's resident memory that maps files (RssFile in
// /proc/<pid>/status: mostly its executable's code and read-only data), in bytes: the
// part of its RSS no heap tuning changes.
func (p *Process) FileRSS() (int64, error) { return p.memoryField("RssFile") }

// memoryField reads one kB field of /proc/<pid>/status, in bytes.
func (p *Process) memoryField(field string) (int64, error) {
	n, err := statusField(p.cmd.Process.Pid, field)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	return n, nil
}

// statusField reads one kB field of /proc/<pid>/status, in bytes.
func statusField(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %s %q: %w", pid, field, v, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
