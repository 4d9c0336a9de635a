package testcluster

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// Server is an HTTP server on 127.0.0.1 started for the cluster.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:PORT).
	URL string
	srv *http.Server
}

// Close stops the server.
func (s *Server) Close() { _ = s.srv.Close() }

func serve(h http.Handler) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + l.Addr().String(), srv: &http.Server{Handler: h}}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// GitServer serves every bare repository under root over git's smart HTTP protocol
// (git's own http-backend), fetch and push, without authentication: the repository
// Flux's source-controller clones and evactl or the operator pushes to.
func GitServer(root string) (*Server, error) {
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true"},
	}
	return serve(backend)
}

// ChartRepository packages every chart folder under chartsDir with the Helm SDK and
// serves them as a Helm repository (index.yaml and the chart archives), the way a
// platform team publishes its module charts for Flux's HelmRepository.
func ChartRepository(chartsDir, workDir string) (*Server, error) {
	out := filepath.Join(workDir, "chart-repository")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(chartsDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ch, err := loader.LoadDir(filepath.Join(chartsDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("loading chart %s: %w", e.Name(), err)
		}
		if _, err := chartutil.Save(ch, out); err != nil {
			return nil, fmt.Errorf("packaging chart %s: %w", e.Name(), err)
		}
	}
	s, err := serve(http.FileServer(http.Dir(out)))
	if err != nil {
		return nil, err
	}
	index, err := repo.IndexDirectory(out, s.URL)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("indexing the chart repository: %w", err)
	}
	index.SortEntries()
	if err := index.WriteFile(filepath.Join(out, "index.yaml"), 0o644); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OCIRegistry serves an OCI distribution registry (go-containerregistry's, blobs in
// memory) over plain HTTP on 127.0.0.1: where `evactl publish oci` pushes and Flux's
// OCIRepository (with insecure: true) pulls. Host is the registry's host:port.
func OCIRegistry() (*Server, error) {
	return serve(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
}

// Host is the server's host:port, as an OCI reference names a registry.
func (s *Server) Host() string { return strings.TrimPrefix(s.URL, "http://") }
