package publish

import (
	"archive/tar"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// tarOf writes n regular files of size bytes each.
func tarOf(t *testing.T, n, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("tenants/f%d.yaml", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(size)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(bytes.Repeat([]byte("x"), size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUntarLimits: entry count, total size and file size are each bounded, with an
// error saying which bound was passed; an archive within them reads whole.
func TestUntarLimits(t *testing.T) {
	limits := archiveLimits{entries: 4, bytes: 100, fileBytes: 40}
	for name, tc := range map[string]struct {
		n, size int
		want    string
	}{
		"within":         {n: 4, size: 25},
		"too many":       {n: 5, size: 1, want: "more than 4 entries"},
		"too big in all": {n: 3, size: 40, want: "more than 100 bytes"},
		"one too big":    {n: 1, size: 41, want: "more than a file may hold"},
	} {
		t.Run(name, func(t *testing.T) {
			tree, err := untar(bytes.NewReader(tarOf(t, tc.n, tc.size)), limits)
			if tc.want == "" {
				if err != nil || len(tree) != tc.n {
					t.Fatalf("got %d files, %v; want %d files", len(tree), err, tc.n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
