package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/testenv"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Execute(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestChartsPackagePushMirror runs the charts commands as a platform team would:
// package twice (same bytes), push (digests recorded), push again (nothing changes),
// push a chart changed without a version bump (refused, nothing pushed, the lock
// untouched), and mirror every published version by digest.
func TestChartsPackagePushMirror(t *testing.T) {
	charts := filepath.Join(t.TempDir(), "charts")
	if err := os.CopyFS(charts, os.DirFS("../../charts")); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(charts, chartrepo.LockFile))

	var outs [2]string
	for i := range outs {
		code, out, errOut := runCLI(t, "charts", "package", "--charts", charts, "--out", filepath.Join(t.TempDir(), "dist"))
		if code != ExitOK {
			t.Fatalf("package: %d %s", code, errOut)
		}
		outs[i] = digests(out)
	}
	if outs[0] != outs[1] || strings.Count(outs[0], "sha256:") != 6 {
		t.Fatalf("packaging twice:\n%s\n%s", outs[0], outs[1])
	}

	source := "oci://" + testenv.Registry(t) + "/eva/charts"
	code, out, errOut := runCLI(t, "charts", "push", "--charts", charts, "--to", source, "--insecure")
	if code != ExitOK {
		t.Fatalf("push: %d %s%s", code, out, errOut)
	}
	lockPath := filepath.Join(charts, chartrepo.LockFile)
	lock, err := chartrepo.ReadLock(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := lock.Find("eva-crm", "1.4.0"); !ok || !strings.Contains(out, "/eva/charts/eva-crm:1.4.0@"+p.Digest) {
		t.Fatalf("lock %+v, output %s", lock, out)
	}
	before := mustRead(t, lockPath)
	code, out, errOut = runCLI(t, "charts", "push", "--charts", charts, "--to", source, "--insecure", "-o", "json")
	var pushed artifactReport
	if code != ExitOK || json.Unmarshal([]byte(out), &pushed) != nil || len(pushed.Items) != 6 || pushed.Lock != lockPath {
		t.Fatalf("pushing again, -o json: %d %s%s", code, out, errOut)
	}
	for _, it := range pushed.Items {
		if p, ok := lock.Find(it.Chart, it.Version); !ok || it.Digest != p.Digest || !strings.HasSuffix(it.Ref, "/eva/charts/"+it.Chart+":"+it.Version) {
			t.Errorf("push -o json says %+v; the lock %+v", it, p)
		}
	}
	if !bytes.Equal(before, mustRead(t, lockPath)) {
		t.Fatal("pushing the same charts again changed the lock")
	}

	if err := os.WriteFile(filepath.Join(charts, "eva-crm", "values.yaml"), []byte("replicaCount: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "charts", "push", "--charts", charts, "--to", source, "--insecure")
	if code != ExitInvalid || !strings.Contains(errOut, "nothing pushed") || !strings.Contains(errOut, "eva-crm 1.4.0 was published as") {
		t.Fatalf("a changed chart under a published version: %d %s", code, errOut)
	}
	if !bytes.Equal(before, mustRead(t, lockPath)) {
		t.Fatal("a refused push changed the lock")
	}
	// validate refuses tenants on the changed chart too: its content is not what was
	// published as 1.4.0.
	tenants := writeFiles(t, map[string]string{"ACMECO.yaml": validTenant})
	if code, out, _ := runValidate(t, "--charts", charts, "--overlays=../../overlays", tenants); code != ExitInvalid || !strings.Contains(out, "raise its version") {
		t.Fatalf("validate on a changed published chart: %d %s", code, out)
	}

	mirror := "oci://" + testenv.Registry(t) + "/mirror"
	code, out, errOut = runCLI(t, "charts", "mirror", "--charts", charts, "--from", source, "--to", mirror, "--insecure")
	if code != ExitOK || strings.Count(out, " ok\n") != 6 {
		t.Fatalf("mirror: %d %s%s", code, out, errOut)
	}
}

// digests keeps the digest column of `charts package` output.
func digests(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		b.WriteString(filepath.Base(f[0]) + " " + f[len(f)-1] + "\n")
	}
	return b.String()
}
