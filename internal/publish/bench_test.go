package publish

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/render"
)

// fleetUpdate renders n tenants (codes AAAAAA...) as a full update, with tenant 0's crm
// replicas set to replicas.
func fleetUpdate(b *testing.B, n, replicas int) (Update, []render.File) {
	b.Helper()
	r := testRenderer(b)
	u := Update{Tenants: map[string][]render.File{}, Full: true}
	var all []render.File
	for i := range n {
		code := []byte("AAAAAA")
		for p, k := 5, i; p >= 0 && k > 0; p, k = p-1, k/26 {
			code[p] = byte('A' + k%26)
		}
		spec := tenantSpec{code: string(code)}
		if i == 0 {
			spec.replicas = replicas
		}
		files, err := r.TenantFiles(makeTenant(spec))
		if err != nil {
			b.Fatal(err)
		}
		u.Tenants[render.DirName(spec.code)] = files
		all = append(all, files...)
	}
	return u, all
}

// BenchmarkGitPublish compares Eva with the git command line on a local bare
// repository: (a) the first publish of a fleet, (b) a publish after one tenant
// changed, at 1,000 and 10,000 tenants.
func BenchmarkGitPublish(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			ctx := context.Background()
			first, files := fleetUpdate(b, n, 0)
			changed, _ := fleetUpdate(b, 1, 5) // the same tenant 0, changed
			for b.Loop() {
				root := b.TempDir()
				// (a) Eva, first publish.
				bare := bareRepo(b, root, "eva.git")
				g := remoteFor(bare, filepath.Join(root, "cache"))
				start := time.Now()
				if _, err := g.Publish(ctx, first, Safety{}); err != nil {
					b.Fatal(err)
				}
				evaFirst := time.Since(start)
				// (b) Eva, one tenant changed, as the operator publishes it.
				start = time.Now()
				res, err := g.Publish(ctx, Update{Tenants: changed.Tenants}, Safety{})
				if err != nil || !res.Committed {
					b.Fatalf("one-tenant publish: %v %+v", err, res)
				}
				evaOne := time.Since(start)

				// The git command line: write the files, add, commit, push.
				gitBare := bareRepo(b, root, "cli.git")
				work := filepath.Join(root, "work")
				gitCLI(b, root, "init", "-q", "-b", "main", work)
				start = time.Now()
				for _, f := range files {
					writeFile(b, filepath.Join(work, f.Path), f.Data)
				}
				writeFile(b, filepath.Join(work, render.RootKustomization), []byte("resources: []\n"))
				gitCLI(b, work, "add", "-A")
				gitCLI(b, work, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "first")
				gitCLI(b, work, "push", "-q", gitBare, "main")
				gitFirst := time.Since(start)
				start = time.Now()
				for _, f := range changed.Tenants[render.DirName("AAAAAA")] {
					writeFile(b, filepath.Join(work, f.Path), f.Data)
				}
				gitCLI(b, work, "add", "-A")
				gitCLI(b, work, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "one")
				gitCLI(b, work, "push", "-q", gitBare, "main")
				gitOne := time.Since(start)

				b.ReportMetric(evaFirst.Seconds(), "eva-first-s")
				b.ReportMetric(gitFirst.Seconds(), "gitcli-first-s")
				b.ReportMetric(evaFirst.Seconds()/gitFirst.Seconds(), "first-eva/gitcli")
				b.ReportMetric(float64(evaOne.Microseconds())/1000, "eva-one-ms")
				b.ReportMetric(float64(gitOne.Microseconds())/1000, "gitcli-one-ms")
			}
		})
	}
}

func writeFile(b *testing.B, p string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOCIPublish builds and pushes the 10,000-tenant render as a Flux artifact to
// a loopback registry, then publishes it again unchanged.
func BenchmarkOCIPublish(b *testing.B) {
	ctx := context.Background()
	u, _ := fleetUpdate(b, 10_000, 0)
	for b.Loop() {
		host, uploads := loopbackRegistry(b)
		o := &OCI{Ref: host + "/eva/tenants:bench", Insecure: true}
		start := time.Now()
		res, err := o.Publish(ctx, u, Safety{})
		if err != nil || !res.Committed {
			b.Fatal(err)
		}
		first := time.Since(start)
		before := uploads.Load()
		start = time.Now()
		again, err := o.Publish(ctx, u, Safety{})
		if err != nil || again.Committed || uploads.Load() != before {
			b.Fatalf("unchanged publish uploaded: %v %+v", err, again)
		}
		b.ReportMetric(first.Seconds(), "push-s")
		b.ReportMetric(time.Since(start).Seconds(), "unchanged-s")
	}
}
