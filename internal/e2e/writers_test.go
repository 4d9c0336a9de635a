package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
)

// Competing publishers: writers operator processes, each with its own tenants. 25 each
// keep the four publishing at once (a tenant's publish waits --publish-batch-window, 1s,
// for the others of its process); the merge of rejected pushes at volume is
// internal/publish's (TestGitConcurrentPublishers, TestOCIWritersDoNotLoseEachOther).
// At 100 each, these two scenarios made 800 of the suite's tenants, most of them.
const (
	writers          = 4
	tenantsPerWriter = 25
)

// TestFourOperatorsShareOneGitBranch runs 4 operator processes in GitOps mode, each
// accepting its own namespace of 25 tenants, all publishing to one branch through the
// git server with their own caches: their pushes race, are rejected and merged again.
// In the end the branch holds all 100 tenants and the root kustomization lists them.
// (No Flux source reads this repository: the test is about the publishers.)
func TestFourOperatorsShareOneGitBranch(t *testing.T) {
	parallel(t)
	url := newGitRepository(t, "writers.git")
	codes := startWriters(t, "e2e-git-writer", "GitRepository", func(i int) []string {
		return []string{"--publish=git", "--git-url=" + url, "--git-branch=main", "--git-cache=" + t.TempDir()}
	})
	repo, err := git.PlainOpen(filepath.Join(gitRoot, "writers.git"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := repo.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := commit.Tree()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	if err := tree.Files().ForEach(func(f *object.File) error {
		content, err := f.Contents()
		files[f.Name] = content
		return err
	}); err != nil {
		t.Fatal(err)
	}
	assertTreeHolds(t, files, codes)
	n := 0
	iter, err := repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		t.Fatal(err)
	}
	if err := iter.ForEach(func(*object.Commit) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tenants from %d operators in %d commits", len(codes), writers, n)
}

// TestFourOperatorsShareOneOCITag is the same with one OCI tag: each publish reads the
// artifact, merges its tenants, and pushes only if the tag still points where it read
// it, else merges again.
func TestFourOperatorsShareOneOCITag(t *testing.T) {
	parallel(t)
	ref := "oci://" + registry.Host() + "/eva/writers:e2e"
	codes := startWriters(t, "e2e-oci-writer", "OCIRepository", func(int) []string {
		return []string{"--publish=oci", "--oci-ref=" + ref, "--oci-insecure"}
	})
	tree, err := (&publish.OCI{Ref: ref, Insecure: true}).Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for p, data := range tree {
		files[p] = string(data)
	}
	assertTreeHolds(t, files, codes)
}

// startWriters starts the operators (args gives each its publishing flags, for an
// environment whose Flux source is of kind), creates each one's tenants in its own
// namespace, waits until every tenant has a published revision and returns the codes.
func startWriters(t *testing.T, prefix, kind string, args func(i int) []string) []string {
	t.Helper()
	ctx := context.Background()
	var codes []string
	var namespaces []string
	// A Flux source nobody created: nothing applies these tenants (the operators' requests
	// to fetch fail and are only logged).
	overlays := environment(t, gitOpsSource(kind, prefix))
	for i := range writers {
		ns := tenantNamespace(t, fmt.Sprintf("%s-%d", prefix, i))
		namespaces = append(namespaces, ns)
		startOperator(t, ns, append([]string{"--overlays=" + overlays}, args(i)...)...)
	}
	letter := strings.ToUpper(prefix[4:5]) // G or O
	start := time.Now()
	for i, ns := range namespaces {
		for k := range tenantsPerWriter {
			code := fmt.Sprintf("W%s%cX%c%c", letter, 'A'+i, 'A'+k/26%26, 'A'+k%26)
			tn := evaTenant(ns, code, evav1.TierStarter)
			if err := cluster.Client.Create(ctx, tn); err != nil {
				t.Fatal(err)
			}
			codes = append(codes, code)
		}
	}
	poll(t, "every tenant published", 6*time.Minute, func() error {
		published := 0
		for _, ns := range namespaces {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("eva.aidonow.com/v1alpha1")
			list.SetKind("EvaTenantList")
			if err := cluster.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, tn := range list.Items {
				if rev, _, _ := unstructured.NestedString(tn.Object, "status", "revision"); rev != "" {
					published++
				}
			}
		}
		if published != len(codes) {
			return fmt.Errorf("%d of %d tenants published", published, len(codes))
		}
		return nil
	})
	t.Logf("%d tenants created and published by %d operators in %s", len(codes), writers, time.Since(start).Round(time.Second))
	return codes
}

// assertTreeHolds checks the published tree holds every tenant's files and the root
// kustomization lists each one.
func assertTreeHolds(t *testing.T, files map[string]string, codes []string) {
	t.Helper()
	root := files[render.RootKustomization]
	lost := 0
	for _, code := range codes {
		dir := render.DirName(code)
		var missing []string
		for _, p := range []string{
			render.FluxDir + "/" + dir + ".yaml",
			render.TenantsDir + "/" + dir + "/" + render.KustomizationFile,
			render.TenantsDir + "/" + dir + "/" + render.ManifestsFile,
			render.TenantsDir + "/" + dir + "/" + render.WorkloadsDir + "/" + render.KustomizationFile,
			render.TenantsDir + "/" + dir + "/" + render.WorkloadsDir + "/" + render.ManifestsFile,
		} {
			if _, ok := files[p]; !ok {
				missing = append(missing, p)
			}
		}
		if !strings.Contains(root, "- "+render.FluxDir+"/"+dir+".yaml\n") {
			missing = append(missing, "its line in the root kustomization")
		}
		if len(missing) > 0 {
			lost++
			if lost <= 5 {
				t.Errorf("tenant %s lost: missing %s", code, strings.Join(missing, ", "))
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d tenants lost", lost, len(codes))
	}
}
