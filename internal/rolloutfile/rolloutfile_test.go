package rolloutfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

const release = `# The crm 1.5.0 release.
apiVersion: eva.aidonow.com/v1alpha1
kind: EvaRollout
metadata:
    name: crm-1-5      # four-space indent, kept
    namespace: eva-system
spec:
  versions: {crm: 1.5.0}
  waves:
  - wave: 1
  - {wave: 2, maxUpdate: 50%}
`

func load(t *testing.T, dir string) *File {
	t.Helper()
	files, problems, err := Load(dir, tenant.DefaultCatalog())
	if err != nil || len(problems) > 0 || len(files) != 1 {
		t.Fatalf("load: %v %v %d files", err, problems, len(files))
	}
	return files[0]
}

// TestSaveKeepsTheFileAndRoundTrips: Save changes the status and creation time, and no
// other byte; what it wrote reads back the same, twice over.
func TestSaveKeepsTheFileAndRoundTrips(t *testing.T) {
	for name, text := range map[string]string{
		"block": release,
		"json":  `{"apiVersion":"eva.aidonow.com/v1alpha1","kind":"EvaRollout","metadata":{"name":"crm-1-5","namespace":"eva-system"},"spec":{"versions":{"crm":"1.5.0"},"waves":[{"wave":1},{"wave":2}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "crm-1-5.yaml")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			f := load(t, dir)
			at := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
			for round := range 2 {
				f.Rollout.CreationTimestamp = at
				f.Rollout.Status = evav1.EvaRolloutStatus{Phase: evav1.RolloutProgressing, CurrentWave: 1, Message: "wave 1: waiting",
					Waves: []evav1.WaveStatus{{Wave: 1, Total: 1, Updated: []evav1.RolloutTenant{{Code: "AAAAAA", Name: "aaaaaa",
						AdmittedAt: &at, Generation: int64(7 + round)}}}, {Wave: 2}}}
				if err := f.Save(); err != nil {
					t.Fatal(err)
				}
				got := load(t, dir)
				if !equality.Semantic.DeepEqual(got.Rollout.Status, f.Rollout.Status) || !got.Rollout.CreationTimestamp.Equal(&at) {
					t.Fatalf("round %d: read back %+v at %v", round, got.Rollout.Status, got.Rollout.CreationTimestamp)
				}
				f = got
			}
			if name != "block" {
				return
			}
			data, _ := os.ReadFile(path)
			want := strings.Replace(release, "metadata:\n", "metadata:\n    creationTimestamp: \"2026-11-24T10:00:00Z\"\n", 1)
			if !strings.HasPrefix(string(data), want+"status:\n") {
				t.Errorf("the release manager's text changed:\n%s", data)
			}
			if strings.Count(string(data), "creationTimestamp") != 1 || strings.Count(string(data), "status:") != 1 {
				t.Errorf("a key written twice:\n%s", data)
			}
		})
	}
}

// TestLoadRefusesHardLinks: a release file with a second name (perhaps outside the
// folder) is refused at its file, not read; the same file alone loads.
func TestLoadRefusesHardLinks(t *testing.T) {
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "elsewhere.yaml")
	if err := os.WriteFile(outside, []byte(release), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(dir, "crm-1-5.yaml")); err != nil {
		t.Skip("no hard links here:", err)
	}
	files, problems, err := Load(dir, tenant.DefaultCatalog())
	if err != nil || len(files) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Message, "a hard link (2 links)") {
		t.Fatalf("load: %v, %d files, problems %v", err, len(files), problems)
	}
	if err := os.Remove(outside); err != nil {
		t.Fatal(err)
	}
	load(t, dir)
}
