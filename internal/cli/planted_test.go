package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/aidonow/eva/internal/testenv"
)

// plantedSecrets are the secret values of issue 10 (section 2), each under the key
// that hid it, as lines of crm values (indented by six). None may ever reach an
// output: not a message, a rendered file, a git object, an OCI blob or a diff.
func plantedSecrets() (lines string, values []string) {
	jwtPayload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"pl4nted-jwt-10","admin":true}`))
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + jwtPayload + ".Pl4ntedJwtSignature10xSflKxwRJSMeKKF2QT4fw"
	values = []string{
		"84736251", "Pl4ntedDbPass01", "Pl4ntedPassWord02", "Pl4ntedPassWd03", "Pl4ntedUrlPass04",
		"AKIAPL4NTED000000001", "Pl4ntedAwsSecretK7MDENGbPxRfiCYEXAMPLE05", jwtPayload, "MIIEpl4ntedPEMbody06",
		"Pl4ntedFileLiteral07", "UGw0bnRlZEJhc2U2NEJsb2IwOC1zZWNyZXQtdmFsdWUtaGVyZQ", "Pl4ntedCyrillic09",
	}
	lines = "      password: 84736251\n" +
		"      dbPass: Pl4ntedDbPass01\n" +
		"      pass_word: Pl4ntedPassWord02\n" +
		"      passWd: Pl4ntedPassWd03\n" +
		"      upstream: https://admin:Pl4ntedUrlPass04@db.example.com/crm\n" +
		"      aws:\n        id: AKIAPL4NTED000000001\n        key: Pl4ntedAwsSecretK7MDENGbPxRfiCYEXAMPLE05\n" +
		"      auth:\n        bearer: " + jwt + "\n" +
		"      tls:\n        key: |\n          -----BEGIN RSA PRIVATE KEY-----\n          MIIEpl4ntedPEMbody06AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n          -----END RSA PRIVATE KEY-----\n" +
		"      passwordFile: Pl4ntedFileLiteral07\n" +
		"      data: UGw0bnRlZEJhc2U2NEJsb2IwOC1zZWNyZXQtdmFsdWUtaGVyZQ==\n" +
		"      p\u0430ssword: Pl4ntedCyrillic09\n"
	return lines, values
}

// plantedTenants returns a folder holding the example tenants and ACMECO carrying
// every planted secret.
func plantedTenants(t *testing.T, lines string) string {
	t.Helper()
	dir := copyTenants(t)
	path := filepath.Join(dir, "ACMECO.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "    crm:\n"
	if !bytes.Contains(data, []byte(anchor)) {
		t.Fatalf("ACMECO.yaml has no crm values to plant into:\n%s", data)
	}
	data = bytes.Replace(data, []byte(anchor), []byte(anchor+lines), 1)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// noPlanted fails for every planted value found in data.
func noPlanted(t *testing.T, where string, data []byte, values []string) {
	t.Helper()
	for _, v := range values {
		if bytes.Contains(data, []byte(v)) {
			t.Errorf("planted secret %q reached %s", v, where)
		}
	}
}

func TestPlantedSecretsNeverReachOutput(t *testing.T) {
	lines, values := plantedSecrets()
	good := copyTenants(t)
	bad := plantedTenants(t, lines)

	t.Run("validate", func(t *testing.T) {
		for _, format := range []string{"text", "json", "github"} {
			code, out, errOut := runValidate(t, "--output", format, "--charts", filepath.Join(repoRoot, "charts"), bad)
			if code != ExitInvalid {
				t.Fatalf("%s: exit %d\n%s%s", format, code, out, errOut)
			}
			noPlanted(t, "validate --output "+format, []byte(out+errOut), values)
			// Each of the twelve is refused at its own line.
			if format == "json" {
				if n := strings.Count(out, `"file"`); n < len(values) {
					t.Errorf("%d problems for %d planted secrets:\n%s", n, len(values), out)
				}
			}
		}
	})

	t.Run("render to a git repository", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "gitops")
		if code, msg := runEvactl(t, renderArgs(good, out)...); code != ExitOK {
			t.Fatalf("render of the clean tenants: exit %d\n%s", code, msg)
		}
		head := gitOut(t, out, "rev-parse", "HEAD")
		code, msg := runEvactl(t, renderArgs(bad, out)...)
		if code != ExitInvalid {
			t.Fatalf("render with planted secrets: exit %d\n%s", code, msg)
		}
		noPlanted(t, "render output", []byte(msg), values)
		if got := gitOut(t, out, "rev-parse", "HEAD"); got != head {
			t.Error("a refused render committed")
		}
		scanWorktree(t, out, values)
		scanGitObjects(t, out, values)

		fresh := filepath.Join(t.TempDir(), "new", "gitops")
		if code, msg := runEvactl(t, renderArgs(bad, fresh)...); code != ExitInvalid {
			t.Fatalf("render into a new folder: exit %d\n%s", code, msg)
		}
		if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
			t.Errorf("a refused render left %s behind (%v)", filepath.Dir(fresh), err)
		}
	})

	t.Run("publish git", func(t *testing.T) {
		bare := filepath.Join(t.TempDir(), "fleet.git")
		if _, err := git.PlainInit(bare, true); err != nil {
			t.Fatal(err)
		}
		cache := filepath.Join(t.TempDir(), "cache")
		target := []string{"--repo", bare, "--branch", "main", "--path", "clusters/dev", "--cache-dir", cache}
		if code, msg := runEvactl(t, append(append([]string{"publish", "git"}, common(good)...), target...)...); code != ExitOK {
			t.Fatalf("publish of the clean tenants: exit %d\n%s", code, msg)
		}
		code, msg := runEvactl(t, append(append([]string{"publish", "git"}, common(bad)...), target...)...)
		if code != ExitInvalid {
			t.Fatalf("publish with planted secrets: exit %d\n%s", code, msg)
		}
		noPlanted(t, "publish git output", []byte(msg), values)
		scanGitObjects(t, bare, values)
		scanGitObjects(t, cache, values)
	})

	t.Run("publish oci", func(t *testing.T) {
		blobs := t.TempDir()
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)),
			registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs))))
		defer srv.Close()
		ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/eva/tenants:dev"
		args := func(tenants string) []string {
			return append([]string{"publish", "oci", "--ref", ref, "--insecure", "--revision", "main@sha1:abc", "--source", "https://example.com/t.git"}, commonOCI(t, tenants)...)
		}
		if code, msg := runEvactl(t, args(good)...); code != ExitOK {
			t.Fatalf("publish of the clean tenants: exit %d\n%s", code, msg)
		}
		code, msg := runEvactl(t, args(bad)...)
		if code != ExitInvalid {
			t.Fatalf("publish with planted secrets: exit %d\n%s", code, msg)
		}
		noPlanted(t, "publish oci output", []byte(msg), values)
		scanBlobs(t, blobs, values)
	})

	t.Run("diff", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "gitops")
		if code, msg := runEvactl(t, renderArgs(good, out, "--git=false")...); code != ExitOK {
			t.Fatalf("render: exit %d\n%s", code, msg)
		}
		diffArgs := func(tenants string, extra ...string) []string {
			return append(append([]string{"diff", "--dir", out}, common(tenants)...), extra...)
		}
		// The tenants themselves: refused, and nothing of them shown.
		code, msg := runEvactl(t, diffArgs(bad)...)
		if code != ExitInvalid {
			t.Fatalf("diff with planted tenants: exit %d\n%s", code, msg)
		}
		noPlanted(t, "diff of planted tenants", []byte(msg), values)

		// A published tree holding the secrets from before the rules existed: the
		// diff shows their removal, redacted, in both formats.
		manifests := filepath.Join(out, "tenants", "acmeco", "manifests.yaml")
		data, err := os.ReadFile(manifests)
		if err != nil {
			t.Fatal(err)
		}
		old := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old-values\n  namespace: eva-tenant-acmeco\ndata:\n" +
			"  values:\n    crm:\n" + lines
		if err := os.WriteFile(manifests, append(data, []byte(old)...), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"text", "json", "yaml"} {
			code, msg := runEvactl(t, diffArgs(good, "--output", format, "--unified")...)
			if code != ExitOK {
				t.Fatalf("diff --output %s: exit %d\n%s", format, code, msg)
			}
			noPlanted(t, "diff --output "+format, []byte(msg), values)
			if !strings.Contains(msg, "redacted: ") || !strings.Contains(msg, "ACMECO") {
				t.Errorf("diff --output %s does not show the redacted removal:\n%s", format, msg)
			}
		}
		code, msg = runEvactl(t, diffArgs(good, "--bookkeeping")...)
		noPlanted(t, "diff summary", []byte(msg), values)
		if code != ExitOK || !strings.Contains(msg, "~ ACMECO (changed)\n    - ConfigMap eva-tenant-acmeco/old-values\n") {
			t.Errorf("diff summary: exit %d, want the removed object named:\n%s", code, msg)
		}
	})
}

// scanWorktree checks every file of a folder but git's own (scanned by object).
func scanWorktree(t *testing.T, dir string, values []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		noPlanted(t, p, data, values)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// scanGitObjects checks every blob and commit a repository stores, reachable or not:
// a secret written as a blob and then refused would still be in .git.
func scanGitObjects(t *testing.T, dir string, values []string) {
	t.Helper()
	n, err := testenv.GitObjects(dir, func(what string, data []byte) { noPlanted(t, dir+" "+what, data, values) })
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("%s holds no blobs: the scan checked nothing", dir)
	}
}

// scanBlobs checks every blob a registry stored, gunzipped when it is a layer.
func scanBlobs(t *testing.T, dir string, values []string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		noPlanted(t, "registry blob "+p, data, values)
		if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
			plain, err := io.ReadAll(zr)
			if err != nil {
				return err
			}
			noPlanted(t, "registry layer "+p, plain, values)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("the registry holds no blobs: the scan checked nothing")
	}
}
