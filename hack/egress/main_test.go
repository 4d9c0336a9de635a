package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAnEscapeIsCaught runs commands under the built program: one that connects to a
// public address and looks a name up must fail the run, with the packets counted and
// the name reported; one that stays on loopback must pass with nothing counted.
func TestAnEscapeIsCaught(t *testing.T) {
	if reason := namespaceUnavailable(); reason != "" {
		t.Skip("zero-egress check unavailable here: " + reason)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "egress")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runUnder := func(script string) (int, Report) {
		t.Helper()
		report := filepath.Join(dir, "report.json")
		cmd := exec.Command(bin, "-report", report, "--", "bash", "-c", script)
		cmd.Env = append(os.Environ(), "RES_OPTIONS=timeout:1 attempts:1")
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var r Report
		data, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("no report: %v\n%s", err, out)
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: exit %d, %d packet(s), DNS %v", script, code, r.PacketsOut, r.DNSQueries)
		return code, r
	}

	code, r := runUnder("timeout 2 bash -c 'exec 3<>/dev/tcp/192.0.2.1/443'; getent hosts eva-egress-probe.example; true")
	if code == 0 || r.PacketsOut == 0 {
		t.Errorf("a connection to 192.0.2.1 passed unseen: exit %d, %d packets", code, r.PacketsOut)
	}
	if len(r.Resolvers) > 0 && (len(r.DNSQueries) == 0 || r.DNSQueries[0] != "eva-egress-probe.example") {
		t.Errorf("the lookup was not reported: %v", r.DNSQueries)
	}

	code, r = runUnder("timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' || true")
	if code != 0 || r.PacketsOut != 0 || len(r.DNSQueries) != 0 {
		t.Errorf("loopback only: exit %d, %d packets, DNS %v", code, r.PacketsOut, r.DNSQueries)
	}
}
