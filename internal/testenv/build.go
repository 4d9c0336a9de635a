package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
)

// built remembers, per test process, what Binary built: path or error by package.
var built sync.Map

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// Binary builds the main package pkg (relative to the repository root, "./cmd/evactl")
// as a user builds it and returns its path, bin/<name>. The file stays between runs: go
// build leaves an up-to-date binary as it is, so a warm run links nothing. Test processes
// running side by side take turns through a lock file, and one process builds a package
// once.
func Binary(pkg, name string) (string, error) {
	v, _ := built.LoadOrStore(pkg, &buildResult{})
	r := v.(*buildResult)
	r.once.Do(func() { r.path, r.err = buildLocked(pkg, name) })
	return r.path, r.err
}

func buildLocked(pkg, name string) (string, error) {
	binDir := filepath.Join(RepoRoot(), "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(binDir, "."+name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking the build of %s: %w", pkg, err)
	}
	out := filepath.Join(binDir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", pkg, err, msg)
	}
	return out, nil
}
