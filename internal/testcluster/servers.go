package testcluster

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
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

// OCIRegistry serves an OCI distribution registry (go-containerregistry's, blobs in
// memory) over plain HTTP on 127.0.0.1: where `evactl publish oci` pushes and Flux's
// OCIRepository (with insecure: true) pulls. Host is the registry's host:port.
func OCIRegistry() (*Server, error) {
	return serve(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
}

// PrivateOCIRegistry is OCIRegistry behind HTTP basic authentication: every request
// without the user and password is answered 401 with a Basic challenge, as a private
// registry answers, so a client pulls only with credentials (the chart registry a
// platform's pull secret is for).
func PrivateOCIRegistry(user, password string) (*Server, error) {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	return serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="eva-test-registry"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
}

// Host is the server's host:port, as an OCI reference names a registry.
func (s *Server) Host() string { return strings.TrimPrefix(s.URL, "http://") }
