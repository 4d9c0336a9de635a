package release

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/aidonow/eva/internal/airgap"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/registry"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// version is the release the tests make: v0 or v1, as a module path without a /vN suffix
// requires.
const version = "0.98.7"

// run runs a released program in dir and returns its combined output.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestReleaseInstallsAsANewUserWould builds a release into a loopback registry and uses
// only what it holds, as a new user would, outside the source tree: the checksums
// check with sha256sum; the released evactl reports its version and makes, validates,
// publishes and diffs a fleet whose environments and charts come from itself; helm
// templates the operator chart pulled from the registry, whose image is the pushed one
// by the digest the release's images.txt records. evactl is built for this machine's
// platform only and the image around a small binary (the operator costs about 40 CPU
// seconds per platform to compile, and the image build has its own test).
func TestReleaseInstallsAsANewUserWould(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles evactl as released")
	}
	bins, err := testcluster.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	helm := bins.Helm
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("the helm CLI: %v (make e2e-binaries builds it)", err)
	}
	reg := testenv.Registry(t)
	out := filepath.Join(t.TempDir(), "dist")
	o := Options{
		Version: version, Revision: "0123456789abcdef0123456789abcdef01234567", Source: "https://github.com/aidonow/eva",
		Created: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), ModuleDir: testenv.RepoRoot(),
		EvactlPackage: "./cmd/evactl", OperatorPackage: "./internal/imagebuild/testdata/smallbinary",
		ChartsDir: "charts", OperatorChartDir: "deploy/charts/eva-operator", ImagesFile: "images.txt",
		EvactlPlatforms: []v1.Platform{{OS: runtime.GOOS, Architecture: runtime.GOARCH}},
		ImagePlatforms:  []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}},
		OutDir:          out, Registry: reg + "/aidonow", RegistryOptions: registry.Options{Insecure: true},
	}
	m, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	run(t, out, nil, "sha256sum", "--check", "--strict", ChecksumsFile)
	var onDisk Manifest
	data, _ := os.ReadFile(filepath.Join(out, ManifestFile))
	if err := json.Unmarshal(data, &onDisk); err != nil || len(onDisk.Charts) != 7 || onDisk.Image.Digest != m.Image.Digest {
		t.Fatalf("release.json: %v\n%s", err, data)
	}
	sbom, _ := os.ReadFile(filepath.Join(out, m.Binaries[0].SBOM))
	if !strings.Contains(string(sbom), `"name": "helm.sh/helm/v3"`) || !strings.Contains(string(sbom), m.Binaries[0].SHA256) {
		t.Fatalf("evactl's SBOM does not list what it links, or not its own hash:\n%.2000s", sbom)
	}

	// evactl as released: its version, then a fleet of its own.
	evactl := filepath.Join(out, m.Binaries[0].File)
	if v := run(t, out, nil, evactl, "version"); !strings.HasPrefix(v, "evactl v"+version+" ") {
		t.Fatalf("released evactl says %q", v)
	}
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	run(t, home, env, evactl, "init", "fleet", "--domain", "dev.acme.test")
	fleet := filepath.Join(home, "fleet")
	if project, _ := os.ReadFile(filepath.Join(fleet, "eva.yaml")); !strings.Contains(string(project), "eva: "+version) {
		t.Fatalf("init did not pin the release:\n%s", project)
	}
	tenant, _ := os.ReadFile(filepath.Join(fleet, "tenants", "EXAMPL.yaml"))
	second := strings.NewReplacer("name: exampl", "name: acmeco", "capsuleCode: EXAMPL", "capsuleCode: ACMECO").Replace(string(tenant))
	if err := os.WriteFile(filepath.Join(fleet, "tenants", "ACMECO.yaml"), []byte(second), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, fleet, env, evactl, "validate")
	bare := filepath.Join(home, "published.git")
	run(t, home, env, "git", "init", "-q", "--bare", bare)
	run(t, fleet, env, evactl, "publish", "git", "-q", "--repo", bare, "--branch", "main")
	if diff := run(t, fleet, env, evactl, "diff", "--exit-code", "--repo", bare, "--branch", "main"); !strings.Contains(diff, "no changes") {
		t.Fatalf("diff right after publish:\n%s", diff)
	}

	// The operator chart from the registry, as helm installs it.
	helmEnv := append(env, "HELM_CACHE_HOME="+filepath.Join(home, "helm-cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "helm-config"), "HELM_DATA_HOME="+filepath.Join(home, "helm-data"))
	manifests := run(t, home, helmEnv, helm, "template", "eva-operator", "oci://"+reg+"/aidonow/charts/eva-operator", "--version", version, "--plain-http", "--namespace", "eva-system")
	image := reg + "/aidonow/eva-operator@" + m.Image.Digest
	if !strings.Contains(manifests, "image: "+image) {
		t.Fatalf("the released chart does not run the pushed image %s", image)
	}
	images, _ := os.ReadFile(filepath.Join(out, ImagesFile))
	entries, _ := airgap.Parse(strings.NewReader(string(images)))
	var recorded string
	for _, e := range entries {
		if strings.HasSuffix(e.Repository, "/eva-operator") {
			recorded = e.Digest
		}
	}
	if recorded != m.Image.Digest {
		t.Fatalf("images.txt records the operator at %q, the chart runs %s", recorded, m.Image.Digest)
	}
	for _, c := range m.Charts {
		if _, err := chartrepo.Pull(context.Background(), m.ChartSource, c.Name, c.Published, o.RegistryOptions); err != nil {
			t.Errorf("chart %s %s as released: %v", c.Name, c.Version, err)
		}
	}

	// A release folder holds one release.
	if _, err := Build(context.Background(), o); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("a second release into the same folder: %v", err)
	}
}

// TestReleaseRefusesChartsItsDigestsDoNotRecord: a module chart edited without make
// manifests packages to a digest charts/published.yaml does not record, which the
// release's evactl and operator would pin: the release stops before pushing anything.
func TestReleaseRefusesChartsItsDigestsDoNotRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "charts"), os.DirFS(filepath.Join(testenv.RepoRoot(), "charts"))); err != nil {
		t.Fatal(err)
	}
	o := Options{ModuleDir: dir, ChartsDir: "charts"}
	if _, err := o.moduleCharts(); err != nil {
		t.Fatalf("the repository's charts as make manifests left them: %v", err)
	}
	notes := filepath.Join(dir, "charts", "eva-crm", "templates", "NOTES.txt")
	if err := os.WriteFile(notes, []byte("edited after make manifests\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := o.moduleCharts()
	if err == nil || !strings.Contains(err.Error(), "eva-crm 1.4.0 packages to sha256:") || !strings.Contains(err.Error(), "run make manifests") {
		t.Fatalf("a chart edited after make manifests: %v", err)
	}
}
