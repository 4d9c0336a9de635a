package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// file is one regular file of a layer.
type file struct {
	path string // absolute path in the image
	mode int64
	data []byte
}

// layer writes files as a tar archive in path order, every parent folder listed
// first, owned by root, every time set to modTime: the same files always give the same
// bytes, so the same digest.
func layer(files []file, modTime time.Time) (v1.Layer, error) {
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.path, b.path) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{"/": true}
	header := func(h *tar.Header) *tar.Header {
		h.ModTime, h.Uid, h.Gid, h.Format = modTime.UTC(), 0, 0, tar.FormatPAX
		return h
	}
	for i, f := range files {
		if i > 0 && files[i-1].path == f.path {
			return nil, fmt.Errorf("%s is in the layer twice", f.path)
		}
		var parents []string
		for dir := path.Dir(f.path); !dirs[dir]; dir = path.Dir(dir) {
			parents = append(parents, dir)
			dirs[dir] = true
		}
		slices.Reverse(parents)
		for _, dir := range parents {
			if err := tw.WriteHeader(header(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755})); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(header(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Size: int64(len(f.data))})); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// Compressed once, here: go-containerregistry would compress again for every
	// digest, size and upload it computes. The gzip header carries no name and no time.
	var compressed bytes.Buffer
	zw, err := gzip.NewWriterLevel(&compressed, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(buf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	data := compressed.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// baseLayer holds what a static Go binary needs from an operating system: CA roots for
// TLS (the Mozilla NSS roots of golang.org/x/crypto/x509roots/fallback, pinned by
// go.sum, so not the build machine's), and the passwd and group entries of the
// non-root user.
func baseLayer(modTime time.Time) (v1.Layer, error) {
	var roots bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		// A root with a constraint (distrusted after a date) cannot be expressed in a
		// PEM bundle: leave it out rather than trust it unconditionally.
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&roots, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the CA bundle is empty")
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUser, NonRootUser)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUser)
	return layer([]file{
		{path: CABundlePath, mode: 0o644, data: roots.Bytes()},
		{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "/etc/group", mode: 0o644, data: []byte(group)},
	}, modTime)
}

// chartsLayer copies the charts folder to ChartBasePath: the files git tracks there
// when the folder is in a git work tree (an ignored or stray file is not source), every
// file otherwise. Links are refused: what they point to is not part of the source.
func chartsLayer(dir string, modTime time.Time) (v1.Layer, error) {
	tracked, err := trackedFiles(dir)
	if err != nil {
		return nil, err
	}
	var files []file
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if tracked != nil && !tracked[filepath.ToSlash(rel)] {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, file{path: path.Join(ChartBasePath, filepath.ToSlash(rel)), mode: 0o644, data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no chart files")
	}
	return layer(files, modTime)
}

// trackedFiles lists the files git tracks under dir, relative to it; nil when dir is
// not in a git work tree.
func trackedFiles(dir string) (map[string]bool, error) {
	check := exec.Command("git", "rev-parse", "--is-inside-work-tree")
	check.Dir = dir
	if out, _ := check.Output(); strings.TrimSpace(string(out)) != "true" {
		return nil, nil // not a work tree (a source archive): every file counts
	}
	cmd := exec.Command("git", "ls-files", "-z", "--", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the files git tracks in %s: %w", dir, err)
	}
	tracked := map[string]bool{}
	for _, name := range strings.Split(string(out), "\x00") {
		if name != "" {
			tracked[name] = true
		}
	}
	return tracked, nil
}

// binaryLayer holds the compiled binary at BinaryPath.
func binaryLayer(bin string, modTime time.Time) (v1.Layer, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return layer([]file{{path: BinaryPath, mode: 0o755, data: data}}, modTime)
}
