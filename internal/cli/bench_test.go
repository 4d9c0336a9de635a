package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchFleet is the fleet the CLI benchmarks render: 10,000 tenant files in the mix the
// fleet-scale issue measures (70% Starter, 20% Customer, 8% Enterprise, 2% Platform),
// half of them with helmValues.
const benchFleet = 10_000

// tmpfsDir makes a folder on tmpfs (where there is one), removed after the benchmark.
func tmpfsDir(b *testing.B, prefix string) string {
	b.Helper()
	base := os.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// writeBenchFleet writes the fleet's tenant files into a new folder on tmpfs, as a
// platform repository's tenants/ holds them.
func writeBenchFleet(b *testing.B) string {
	b.Helper()
	dir := tmpfsDir(b, "eva-bench-tenants-")
	writeFleet(b, dir, benchFleet)
	return dir
}

// writeFleet writes n generated tenant files into dir in the fleet-scale mix (70%
// Starter, 20% Customer, 8% Enterprise, 2% Platform, half with helmValues), codes
// AAAAAA, AAAAAB, ...
func writeFleet(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := range n {
		code := benchCode(i)
		tier := "Starter"
		switch p := i % 100; {
		case p >= 98:
			tier = "Platform"
		case p >= 90:
			tier = "Enterprise"
		case p >= 70:
			tier = "Customer"
		}
		values := ""
		if i%2 == 0 {
			values = "  helmValues:\n    crm:\n      replicaCount: 2\n      logLevel: debug\n"
		}
		text := fmt.Sprintf("apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata:\n  name: %s\nspec:\n  capsuleCode: %s\n  tier: %s\n  wave: %d\n  seedsVersion: seeds-1.0.0\n%s",
			lower(code), code, tier, 1+i%3, values)
		if err := os.WriteFile(filepath.Join(dir, code+".yaml"), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchCode(i int) string {
	code := []byte("AAAAAA")
	for j := 5; j >= 0 && i > 0; j-- {
		code[j] = byte('A' + i%26)
		i /= 26
	}
	return string(code)
}

func lower(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

// BenchmarkRenderCLI renders the 10,000-tenant fleet through evactl render as users run
// it (reading and validating the tenant files included) to tmpfs, once per shipped
// environment: dev (no patches), prod (a strategic-merge patch on every HelmRelease) and
// air-gap, with chart verification off, and prod with it on (the default). It reports
// seconds per fleet; the fleet-scale goals are 3 s for every overlay and verification
// at most 3 times the render without it.
func BenchmarkRenderCLI(b *testing.B) {
	tenants := writeBenchFleet(b)
	cases := []struct {
		name, env string
		verify    bool
	}{
		{"dev", "dev", false}, {"prod", "prod", false}, {"airgap", "airgap", false}, {"prod-verified", "prod", true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			args := []string{"render", "--tenants", tenants, "--env", c.env, "--git=false", "--quiet",
				"--overlays", filepath.Join(repoRoot, "overlays"), "--charts", filepath.Join(repoRoot, "charts"),
				fmt.Sprintf("--verify-charts=%t", c.verify)}
			for b.Loop() {
				out := filepath.Join(tmpfsDir(b, "eva-bench-out-"), "gitops")
				start := time.Now()
				if code := Execute(append(args, "--out", out), io.Discard, io.Discard); code != ExitOK {
					b.Fatalf("evactl render --env %s: exit %d", c.env, code)
				}
				b.ReportMetric(time.Since(start).Seconds(), "s/fleet")
			}
		})
	}
}
