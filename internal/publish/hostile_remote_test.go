package publish

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitRemoteCredentialsInURL: a repository URL with a token in it (as the operator's
// --git-url may be given) is used to publish, but the token is neither kept in the
// cache's git config nor echoed in errors.
func TestGitRemoteCredentialsInURL(t *testing.T) {
	ctx := context.Background()
	const token = "s3cr3t-t0ken-value"
	t.Run("published, cache keeps a clean URL", func(t *testing.T) {
		root := t.TempDir()
		bareRepo(t, root, "fleet.git")
		srv := gitHTTPServer(t, root, "eva", token)
		url := strings.Replace(srv.URL, "http://", "http://eva:"+token+"@", 1) + "/fleet.git"
		cache := filepath.Join(t.TempDir(), "cache")
		if _, err := remoteFor(url, cache).Publish(ctx, renderUpdate(t, true, codes("CRED", 1)...), Safety{}); err != nil {
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error shows the token: %v", err)
			}
			t.Fatal(err)
		}
		config, err := os.ReadFile(filepath.Join(cache, "config"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(config), token) {
			t.Errorf("the cache's git config holds the token:\n%s", config)
		}
	})
	t.Run("errors show a clean URL", func(t *testing.T) {
		url := "https://x-access-token:" + token + "@127.0.0.1:1/fleet.git?access_token=" + token
		_, err := remoteFor(url, filepath.Join(t.TempDir(), "cache")).Publish(ctx, renderUpdate(t, true, codes("CRED", 1)...), Safety{})
		if err == nil {
			t.Fatal("publishing to a closed port succeeded")
		}
		if strings.Contains(err.Error(), token) {
			t.Errorf("the error shows the token: %v", err)
		}
	})
}

// TestGitRemoteRefusesForgedAuthor: an author name or email that would end the
// signature line (a newline, or '<' '>') is refused before anything is committed.
func TestGitRemoteRefusesForgedAuthor(t *testing.T) {
	ctx := context.Background()
	for name, author := range map[string]Author{
		"newline in name": {Name: "Eva\nSigned-off-by: Mallory", Email: "eva@example.com"},
		"angle in name":   {Name: "Eva <mallory@example.com>", Email: "eva@example.com"},
		"angle in email":  {Name: "Eva", Email: "eva@example.com> 0 +0000\nparent"},
	} {
		t.Run(name, func(t *testing.T) {
			bare := bareRepo(t, t.TempDir(), "fleet.git")
			g := remoteFor(bare, filepath.Join(t.TempDir(), "cache"))
			g.Author = author
			_, err := g.Publish(ctx, renderUpdate(t, true, codes("AUTH", 1)...), Safety{})
			if err == nil || !strings.Contains(err.Error(), "author") {
				t.Fatalf("publishing as %q: %v, want the author refused", author, err)
			}
			if strings.ContainsAny(err.Error(), "\n") {
				t.Errorf("the error holds a raw newline: %q", err)
			}
		})
	}
}

// plant adds hostile entries to the published branch of bare with the git CLI: a work
// tree is cloned, prepare edits it and its index, and the result is committed and
// pushed.
func plant(t *testing.T, bare string, prepare func(work string)) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=m", "GIT_AUTHOR_EMAIL=m@example.com", "GIT_COMMITTER_NAME=m", "GIT_COMMITTER_EMAIL=m@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(filepath.Dir(work), "clone", "-q", "-b", "main", bare, work)
	prepare(work)
	run(work, "commit", "-q", "-m", "planted")
	run(work, "push", "-q", "origin", "main")
}

// TestGitRemoteRefusesForeignTenantEntries: under tenants/ of the published branch, a
// folder whose name is not a capsule code (one with a newline would plant a line in the
// root kustomization), a file, or a submodule is refused, naming the path and the
// reason, instead of being carried on or replaced.
func TestGitRemoteRefusesForeignTenantEntries(t *testing.T) {
	ctx := context.Background()
	var gitIndex func(work string, args ...string)
	write := func(p, content string) {
		defer gitIndex(strings.SplitN(p, string(filepath.Separator)+"tenants"+string(filepath.Separator), 2)[0], "add", "-A")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIndex = func(work string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for name, tc := range map[string]struct {
		prepare func(work string)
		want    []string
	}{
		"folder with a newline": {
			prepare: func(work string) {
				write(filepath.Join(work, "tenants", "abcdef\n- planted", "manifests.yaml"), "kind: ClusterRoleBinding\n")
			},
			want: []string{`tenants/abcdef\n- planted`, "not a capsule code"},
		},
		"folder of upper case": {
			prepare: func(work string) { write(filepath.Join(work, "tenants", "ABCDEF", "manifests.yaml"), "x: 1\n") },
			want:    []string{"tenants/ABCDEF", "not a capsule code"},
		},
		"file": {
			prepare: func(work string) { write(filepath.Join(work, "tenants", "planted.yaml"), "x: 1\n") },
			want:    []string{"tenants/planted.yaml", "not a folder"},
		},
		"submodule": {
			prepare: func(work string) {
				gitIndex(work, "update-index", "--add", "--cacheinfo", "160000,0123456789abcdef0123456789abcdef01234567,tenants/subsub")
			},
			want: []string{"tenants/subsub", "submodule"},
		},
		"submodule in a tenant": {
			prepare: func(work string) {
				gitIndex(work, "update-index", "--add", "--cacheinfo", "160000,0123456789abcdef0123456789abcdef01234567,tenants/hostaa/sub")
			},
			want: []string{"tenants/hostaa/sub", "submodule"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			bare := bareRepo(t, t.TempDir(), "fleet.git")
			g := remoteFor(bare, filepath.Join(t.TempDir(), "cache"))
			if _, err := g.Publish(ctx, renderUpdate(t, true, codes("HOST", 1)...), Safety{}); err != nil {
				t.Fatal(err)
			}
			plant(t, bare, tc.prepare)
			// A partial update (as the operator publishes) of the tenant already there.
			_, err := g.Publish(ctx, renderUpdate(t, false, tenantSpec{code: "HOSTAA", replicas: 2}), Safety{})
			if err == nil {
				root := gitCLI(t, bare, "show", "main:kustomization.yaml")
				t.Fatalf("published over the planted entry; the root kustomization now reads:\n%s", root)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, _, err := g.Read(ctx); err == nil {
				t.Errorf("Read (evactl diff --repo) accepted the planted entry")
			}
		})
	}
}
