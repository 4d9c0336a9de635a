package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/aidonow/eva/internal/testenv"
)

// TestPinAndMirror seeds a source registry with random images and a multi-platform
// index, pins images.txt against it, mirrors to a second registry, and checks every
// digest there; an image missing from the source fails by name while the rest copy.
func TestPinAndMirror(t *testing.T) {
	ctx := context.Background()
	src, dst := testenv.Registry(t), testenv.Registry(t)
	reg := Registry{Insecure: true}
	digests := map[string]v1.Hash{}
	push := func(repoTag string, write func(name.Reference) (v1.Hash, error)) {
		ref, err := name.ParseReference(src+"/"+repoTag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		h, err := write(ref)
		if err != nil {
			t.Fatal(err)
		}
		digests[repoTag] = h
	}
	for _, repoTag := range []string{"aidonow/eva-crm:1.4.0", "aidonow/eva-itsm:1.2.0"} {
		push(repoTag, func(ref name.Reference) (v1.Hash, error) {
			img, _ := random.Image(512, 2)
			h, _ := img.Digest()
			return h, remote.Write(ref, img)
		})
	}
	push("aidonow/eva-operator:0.1.0", func(ref name.Reference) (v1.Hash, error) {
		idx, _ := random.Index(256, 1, 3) // three platforms
		h, _ := idx.Digest()
		return h, remote.WriteIndex(ref, idx)
	})

	file := filepath.Join(t.TempDir(), "images.txt")
	text := "# images\n" + src + "/aidonow/eva-operator:0.1.0@sha256:PLACEHOLDER\n\n" +
		src + "/aidonow/eva-crm:1.4.0@sha256:PLACEHOLDER\n" + src + "/aidonow/eva-itsm:1.2.0\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := Pin(ctx, file, reg); err != nil || n != 3 {
		t.Fatalf("pin: %d %v", n, err)
	}
	data, _ := os.ReadFile(file)
	entries, problems := Parse(strings.NewReader(string(data)))
	if len(problems) != 0 || len(entries) != 3 || !strings.HasPrefix(string(data), "# images\n") {
		t.Fatalf("pinned file:\n%s\n%v", data, problems)
	}
	for _, e := range entries {
		repoTag := strings.TrimPrefix(e.Repository, src+"/") + ":" + e.Tag
		if e.Digest != digests[repoTag].String() {
			t.Errorf("%s pinned to %s, pushed %s", repoTag, e.Digest, digests[repoTag])
		}
	}

	// Dry run: a plan, nothing copied.
	plan := Mirror(ctx, entries, dst+"/mirror", reg, 2, true, nil)
	if len(plan) != 3 || plan[0].To != dst+"/mirror/aidonow/eva-operator:0.1.0" {
		t.Fatalf("plan: %+v", plan)
	}
	if _, err := remote.Head(mustRef(t, plan[0].To)); err == nil {
		t.Fatal("a dry run copied")
	}

	// A missing source image fails by name; the others are copied and verified.
	entries = append(entries, Entry{Repository: src + "/aidonow/eva-missing", Tag: "9.9.9", Digest: "sha256:" + strings.Repeat("0", 64)})
	copies := Mirror(ctx, entries, dst+"/mirror", reg, 2, false, nil)
	var failed []string
	for _, c := range copies {
		if c.Err != nil {
			failed = append(failed, c.From)
			continue
		}
		desc, err := remote.Head(mustRef(t, c.To))
		if err != nil || desc.Digest.String() != strings.Split(c.From, "@")[1] {
			t.Errorf("%s at the mirror: %v %v", c.To, desc, err)
		}
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "eva-missing") {
		t.Fatalf("failures: %v", failed)
	}
	// The index came over whole.
	idx, err := remote.Index(mustRef(t, dst+"/mirror/aidonow/eva-operator:0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := idx.IndexManifest(); len(m.Manifests) != 3 {
		t.Fatalf("mirrored index has %d manifests, want 3", len(m.Manifests))
	}
}

func TestPinFailsWithoutWriting(t *testing.T) {
	src := testenv.Registry(t)
	file := filepath.Join(t.TempDir(), "images.txt")
	text := src + "/aidonow/nothing:1.0.0@sha256:PLACEHOLDER\n"
	_ = os.WriteFile(file, []byte(text), 0o644)
	if _, err := Pin(context.Background(), file, Registry{Insecure: true}); err == nil || !strings.Contains(err.Error(), "aidonow/nothing:1.0.0") {
		t.Fatalf("err = %v", err)
	}
	if data, _ := os.ReadFile(file); string(data) != text {
		t.Fatal("a failed pin rewrote the file")
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestSyncOverlay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kustomization.yaml")
	text := "# keep me\nimages:\n  - name: ghcr.io/aidonow/eva-operator\n    newName: registry.eva.internal/aidonow/eva-operator\n    digest: sha256:PLACEHOLDER\n"
	_ = os.WriteFile(file, []byte(text), 0o644)
	d := "sha256:" + strings.Repeat("cd", 32)
	n, err := SyncOverlay(file, []Entry{{Repository: "ghcr.io/aidonow/eva-operator", Tag: "0.1.0", Digest: d}})
	if err != nil || n != 1 {
		t.Fatalf("sync: %d %v", n, err)
	}
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), "    digest: "+d+"\n") || !strings.HasPrefix(string(data), "# keep me\n") {
		t.Fatalf("synced overlay:\n%s", data)
	}
	if _, err := SyncOverlay(file, nil); err == nil || !strings.Contains(err.Error(), "eva-operator") {
		t.Fatalf("unknown image: %v", err)
	}
}

func TestSyncTenantOverlay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kustomization.yaml")
	text := "patches:\n  - patch: |-\n      - op: add\n        value:\n          repository: registry.eva.internal/aidonow/eva-crm\n          digest: sha256:PLACEHOLDER\n"
	_ = os.WriteFile(file, []byte(text), 0o644)
	d := "sha256:" + strings.Repeat("ef", 32)
	if n, err := SyncOverlay(file, []Entry{{Repository: "ghcr.io/aidonow/eva-crm", Tag: "1.4.0", Digest: d}}); err != nil || n != 1 {
		t.Fatalf("sync: %d %v", n, err)
	}
	if data, _ := os.ReadFile(file); !strings.Contains(string(data), "          digest: "+d+"\n") {
		t.Fatalf("synced:\n%s", data)
	}
}

func TestSyncSeedImage(t *testing.T) {
	file := filepath.Join(t.TempDir(), "environment.yaml")
	_ = os.WriteFile(file, []byte("domain: eva.internal\nseedImage: registry.eva.internal/aidonow/eva-seeder:0.1.0@sha256:PLACEHOLDER\n"), 0o644)
	d := "sha256:" + strings.Repeat("12", 32)
	if n, err := SyncOverlay(file, []Entry{{Repository: "ghcr.io/aidonow/eva-seeder", Tag: "0.1.0", Digest: d}}); err != nil || n != 1 {
		t.Fatalf("sync: %d %v", n, err)
	}
	if data, _ := os.ReadFile(file); !strings.Contains(string(data), "seedImage: registry.eva.internal/aidonow/eva-seeder:0.1.0@"+d+"\n") {
		t.Fatalf("synced:\n%s", data)
	}
}

// TestSyncShippedAirgapOverlay syncs the shipped overlays/airgap/kustomization.yaml,
// whose configMapGenerator also lists `- name:` entries that are not images, and keeps
// a placeholder entry's digest where it is.
func TestSyncShippedAirgapOverlay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kustomization.yaml")
	data, err := os.ReadFile(filepath.Join("..", "..", "overlays", "airgap", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(file, data, 0o644)
	d := "sha256:" + strings.Repeat("ab", 32)
	n, err := SyncOverlay(file, []Entry{{Repository: "ghcr.io/aidonow/eva-operator", Tag: "0.1.0", Digest: d}})
	if err != nil || n != 1 {
		t.Fatalf("sync: %d %v", n, err)
	}
	if got, _ := os.ReadFile(file); !strings.Contains(string(got), "digest: "+d) {
		t.Fatalf("synced:\n%s", got)
	}
	if n, err := SyncOverlay(file, []Entry{{Repository: "ghcr.io/aidonow/eva-operator", Tag: "0.1.0", Digest: Placeholder}}); err != nil || n != 0 {
		t.Fatalf("a placeholder entry set %d digest(s): %v", n, err)
	}
	if got, _ := os.ReadFile(file); !strings.Contains(string(got), "digest: "+d) {
		t.Fatalf("a placeholder entry overwrote the digest:\n%s", got)
	}
}
