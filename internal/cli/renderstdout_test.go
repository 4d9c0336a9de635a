package cli

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/aidonow/eva/internal/render"
)

// streamObjects decodes a YAML stream as kubectl does, and names each object
// "<kind> <namespace>/<name>".
func streamObjects(t *testing.T, stream []byte) []string {
	t.Helper()
	var names []string
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("decoding the stream: %v", err)
		}
		if u.Object != nil {
			names = append(names, u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName())
		}
	}
}

// TestRenderToStdoutStreamsTheManifests: render --out - writes, to standard output
// only, every object the tree holds but kustomize's own files and the encrypted Secrets
// (named in a comment), each after the comment naming its file, in path order; no
// folder named "-" is made.
func TestRenderToStdoutStreamsTheManifests(t *testing.T) {
	tenants := copyTenants(t)
	folder := filepath.Join(t.TempDir(), "tree")
	if code, out := runEvactl(t, renderArgs(tenants, folder, "--git=false")...); code != ExitOK {
		t.Fatalf("render into a folder: exit %d\n%s", code, out)
	}
	var want []string
	encrypted := 0
	err := filepath.WalkDir(folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "kustomization.yaml" {
			return err
		}
		if filepath.Base(filepath.Dir(p)) == render.SecretsDir {
			encrypted++
			return nil
		}
		data, err := os.ReadFile(p)
		want = append(want, streamObjects(t, data)...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := Execute(renderArgs(tenants, "-"), &stdout, &stderr); code != ExitOK {
		t.Fatalf("render --out -: exit %d\n%s", code, stderr.String())
	}
	got := streamObjects(t, stdout.Bytes())
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("render --out - streamed %d objects, want the folder's %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	var sources []string
	for line := range strings.Lines(stdout.String()) {
		if s, ok := strings.CutPrefix(line, "# Source: "); ok {
			sources = append(sources, strings.TrimSpace(s))
		}
	}
	if left := strings.Count(stdout.String(), ": a SOPS-encrypted Secret, left out\n"); encrypted == 0 || left != encrypted {
		t.Errorf("%d encrypted Secrets said to be left out, want the folder's %d", left, encrypted)
	}
	if len(sources) != len(got)+encrypted || !slices.IsSorted(sources) {
		t.Errorf("%d \"# Source:\" comments for %d objects, sorted %v: %v", len(sources), len(got), slices.IsSorted(sources), sources)
	}
	if _, err := os.Stat("-"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("render --out - made a folder named -: %v", err)
	}
}
