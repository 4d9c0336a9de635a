package publish

import (
	"archive/tar"
	"io"
	"strings"
	"testing"
)

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestUntarRefusesAnOversizedFile: a layer entry bigger than a file may hold is refused
// with its name, not truncated into a file Eva would then merge and push again.
func TestUntarRefusesAnOversizedFile(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		size := int64(MaxArtifactFileBytes + 1)
		if err := tw.WriteHeader(&tar.Header{Name: "tenants/bigbig/manifests.yaml", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}); err != nil {
			pw.CloseWithError(err)
			return
		}
		if _, err := io.CopyN(tw, zeros{}, size); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(tw.Close())
	}()
	tree, err := Untar(pr)
	pr.Close()
	if err == nil {
		t.Fatalf("an entry of %d bytes was read (%d bytes kept), want it refused", MaxArtifactFileBytes+1, len(tree["tenants/bigbig/manifests.yaml"]))
	}
	if !strings.Contains(err.Error(), "tenants/bigbig/manifests.yaml") {
		t.Errorf("error does not name the entry: %v", err)
	}
}
