package publish

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

func testRenderer(t testing.TB) *render.Renderer {
	t.Helper()
	env, err := overlay.Load(filepath.Join("..", "..", "overlays"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	return &render.Renderer{Catalog: tenant.DefaultCatalog(), Env: env}
}

// tenantSpec describes a test tenant: code, replicas of crm (to make versions differ)
// and lifecycle.
type tenantSpec struct {
	code      string
	replicas  int
	lifecycle evav1.Lifecycle
	uid       string // of an EvaTenant applied to the cluster; empty for a tenant file
}

func makeTenant(s tenantSpec) *evav1.EvaTenant {
	t := &evav1.EvaTenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(s.code), UID: types.UID(s.uid)},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: s.code, Tier: evav1.TierStarter, Lifecycle: s.lifecycle},
	}
	if s.replicas > 0 {
		t.Spec.HelmValues = map[string]apiextensionsv1.JSON{"crm": {Raw: []byte(fmt.Sprintf(`{"replicaCount":%d}`, s.replicas))}}
	}
	return t
}

// renderUpdate renders tenants into an update (full or partial).
func renderUpdate(t testing.TB, full bool, specs ...tenantSpec) Update {
	t.Helper()
	r := testRenderer(t)
	u := Update{Tenants: map[string][]render.File{}, Full: full}
	for _, s := range specs {
		files, err := r.TenantFiles(makeTenant(s))
		if err != nil {
			t.Fatal(err)
		}
		u.Tenants[render.DirName(s.code)] = files
	}
	return u
}

func codes(prefix string, n int) []tenantSpec {
	out := make([]tenantSpec, n)
	for i := range n {
		out[i] = tenantSpec{code: fmt.Sprintf("%s%c%c", prefix, 'A'+i/26, 'A'+i%26)}
	}
	return out
}

// bareRepo makes an empty bare repository under root named name and returns its path.
func bareRepo(t testing.TB, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if _, err := git.PlainInit(dir, true); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, dir, "config", "http.receivepack", "true")
	gitCLI(t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
	return dir
}

// gitCLI runs the git command line (the reference implementation) in dir.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitHTTPServer serves every bare repository under root over smart HTTP with git's
// own http-backend on loopback, requiring basic auth user/password when user is set.
func gitHTTPServer(t testing.TB, root, user, password string) *httptest.Server {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			r.Header.Set("Remote-User", u)
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// treeOf lists the files of the branch head of a bare repository with the git CLI.
func treeOf(t testing.TB, bare, branch string) map[string]string {
	t.Helper()
	out := gitCLI(t, bare, "ls-tree", "-r", "refs/heads/"+branch)
	files := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		meta, path, _ := strings.Cut(line, "\t")
		fields := strings.Fields(meta)
		files[path] = fields[2]
	}
	return files
}
