package publish

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitRemoteReadRefusesFileForFolder: evactl diff --repo reads the published tree
// with the same check as an OCI artifact's, and publish checks it before planning: a
// file where the publish path or tenants/ should be a folder is refused with its path,
// not read as an empty tree nor replaced by Eva's folders.
func TestGitRemoteReadRefusesFileForFolder(t *testing.T) {
	ctx := context.Background()
	for label, tc := range map[string]struct {
		path, file string
		want       []string
	}{
		"publish path a file":    {path: "deploy", file: "deploy", want: []string{"deploy", "not a folder"}},
		"above the publish path": {path: "fleet/dev", file: "fleet", want: []string{"fleet", "not a folder"}},
		"tenants a file":         {file: "tenants", want: []string{"tenants", "not a folder"}},
	} {
		t.Run(label, func(t *testing.T) {
			bare := bareRepo(t, t.TempDir(), "fleet.git")
			if _, err := remoteFor(bare, filepath.Join(t.TempDir(), "cache")).Publish(ctx, renderUpdate(t, true, codes("READ", 1)...), Safety{}); err != nil {
				t.Fatal(err)
			}
			plant(t, bare, func(work string) {
				gitCLI(t, work, "rm", "-rq", "tenants")
				if err := os.WriteFile(filepath.Join(work, tc.file), []byte("x: 1\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				gitCLI(t, work, "add", "-A")
			})
			g := remoteFor(bare, filepath.Join(t.TempDir(), "cache"))
			g.Path = tc.path
			tree, _, err := g.Read(ctx)
			if err == nil {
				t.Fatalf("Read accepted a file where a folder goes: %d files", len(tree))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			before := gitCLI(t, bare, "rev-parse", "main")
			_, err = g.Publish(ctx, renderUpdate(t, true, codes("READ", 1)...), Safety{})
			if err == nil {
				t.Fatalf("Publish replaced the file where a folder goes")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("publish error %q does not say %q", err, w)
				}
			}
			if after := gitCLI(t, bare, "rev-parse", "main"); after != before {
				t.Errorf("the branch moved from %s to %s", before, after)
			}
		})
	}
}
