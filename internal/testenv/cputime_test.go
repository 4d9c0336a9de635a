package testenv

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestProcStatReadsThisProcess checks the /proc/<pid>/stat reading against what the
// kernel reports through getrusage: the command name, the parent, and CPU time in the
// right unit.
func TestProcStatReadsThisProcess(t *testing.T) {
	name, before, ppid, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Base(os.Args[0]); len(want) > 15 && name != want[:15] || len(want) <= 15 && name != want {
		t.Errorf("command name %q, want %q", name, want)
	}
	if ppid != os.Getppid() {
		t.Errorf("parent %d, want %d", ppid, os.Getppid())
	}
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := rusage()
	for x := 0; rusage()-start < 300*time.Millisecond; x++ {
		_ = x * x
	}
	_, after, _, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 200*time.Millisecond || d > 3*time.Second {
		t.Errorf("after 300ms of CPU (getrusage) /proc says %v were used", d)
	}
}
