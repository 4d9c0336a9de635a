package e2e

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

// TestCellsMoveInGitOpsMode moves a tenant between two cells whose operators publish
// for Flux, each cell's tree applied by its own cluster's real Flux: the cells' folders
// of one git repository, or the cells' OCI artifacts. The target's operator is killed
// (SIGKILL) right after it published, the fleet operator while the target provisions,
// and the source's operator during its drain. The tenant ends Active on us-1 from the
// us-1 tree alone (in git, published there once); eu-1's tree and cluster hold nothing
// of it. A second move, undone while its target provisions, leaves nothing on the
// target. Deleted afterwards, the moved tenant is decommissioned on us-1 from the
// record the move handed over.
func TestCellsMoveInGitOpsMode(t *testing.T) {
	if os.Getenv(cellsE2E) == "" {
		t.Skip("two clusters with Flux each: run with make e2e-cells")
	}
	for _, mode := range []string{"git", "oci"} {
		t.Run(mode, func(t *testing.T) { cellsGitOpsMove(t, mode) })
	}
}

// cellTrees are the cells' published trees of one delivery mode.
type cellTrees interface {
	// holds says whether cell's tree holds the tenant's folder.
	holds(t *testing.T, cell, code string) bool
	// publishes counts the publishes that changed the tenant's folder in cell's tree,
	// or -1 when the mode keeps no history (an OCI tag moves).
	publishes(t *testing.T, cell, code string) int
}

func cellsGitOpsMove(t *testing.T, mode string) {
	ctx := context.Background()
	cell, _ := startCell(t)
	cellsDir := cellsOverlays(t)
	kind := map[string]string{"git": "GitRepository", "oci": "OCIRepository"}[mode]
	if err := setSettings(filepath.Join(cellsDir, "dev", "tenant", overlay.SettingsFile), gitOpsSource(kind, "cells")); err != nil {
		t.Fatal(err)
	}
	clusters := map[string]client.Client{"eu-1": cluster.Client, "us-1": cell.Client}
	var trees cellTrees
	var publishArgs func(cell string) []string
	switch mode {
	case "git":
		url := newGitRepository(t, "cells.git")
		for name, c := range clusters {
			if err := bootstrapSourceOn(ctx, c, kind, "cells", url, "main", "10m", "./cells/"+name); err != nil {
				t.Fatal(err)
			}
		}
		trees = gitTrees(filepath.Join(gitRoot, "cells.git"))
		caches := map[string]string{"eu-1": t.TempDir(), "us-1": t.TempDir()}
		publishArgs = func(name string) []string {
			return []string{"--publish=git", "--git-url=" + url, "--git-branch=main", "--git-cache=" + caches[name]}
		}
	case "oci":
		ref := "oci://" + registry.Host() + "/eva/cells:e2e"
		for name, c := range clusters {
			repo, _, _ := strings.Cut(publish.CellRef(ref, "cells/"+name), ":e2e")
			if err := bootstrapSourceOn(ctx, c, kind, "cells", repo, "e2e", "10m", "./"); err != nil {
				t.Fatal(err)
			}
		}
		trees = ociTrees(ref)
		publishArgs = func(string) []string { return []string{"--publish=oci", "--oci-ref=" + ref, "--oci-insecure"} }
	}
	const drain = 15 * time.Second
	ns := tenantNamespace(t, "cells-"+mode)
	ops := startCellOperators(t, cell, cellsDir, ns, drain, publishArgs)
	modules := len(tenant.DefaultCatalog().ModulesOf("Starter"))
	pinned := func(code, cell string) *unstructured.Unstructured {
		tn := evaTenant(ns, code, "Starter")
		_ = unstructured.SetNestedField(tn.Object, map[string]any{"cell": cell}, "spec", "placement")
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		return tn
	}
	prefix := map[string]string{"git": "CELG", "oci": "CELO"}[mode]
	moving, staying := pinned(prefix+"MA", "eu-1"), pinned(prefix+"ST", "us-1")
	kubectlWaitReady(t, 5*time.Minute, moving, staying)
	code := codeOf(moving)
	for name, c := range clusters {
		if err := deliveredOn(ctx, c, code, modules, name == "eu-1"); err != nil {
			t.Fatalf("%s before its move, on %s: %v", code, name, err)
		}
		if got := trees.holds(t, name, code); got != (name == "eu-1") {
			t.Fatalf("before the move, the %s tree holds %s: %v", name, code, got)
		}
	}

	pinTo(t, moving, "us-1")
	killed := map[string]bool{}
	// The availability window, and the drain: how long the source's modules kept
	// running once its Ingress was gone.
	var window availability
	var trafficOff, modulesOff time.Time
	deadline := time.Now().Add(within(t, 5*time.Minute))
	for {
		eu, us := servingOn(ctx, cluster.Client, code), servingOn(ctx, cell.Client, code)
		window.observe(eu, us)
		now := time.Now()
		if !eu && trafficOff.IsZero() {
			trafficOff = now
		}
		if !trafficOff.IsZero() && modulesOff.IsZero() && deliveredOn(ctx, cluster.Client, code, modules, true) != nil {
			modulesOff = now
		}
		u, err := current(ctx, moving)
		if err != nil {
			t.Fatal(err)
		}
		cellNow, _, _ := unstructured.NestedString(u.Object, "status", "cell")
		step, _, _ := unstructured.NestedString(u.Object, "status", "move", "step")
		targetRevision, _, _ := unstructured.NestedString(u.Object, "status", "move", "targetPublished", "revision")
		sourceStep, _, _ := unstructured.NestedString(u.Object, "status", "decommissionStep")
		switch {
		case step == "ProvisioningTarget" && !killed["fleet"]:
			killed["fleet"] = true
			ops.restart("fleet")
		case step == "ProvisioningTarget" && targetRevision != "" && !killed["us-1"]:
			killed["us-1"] = true
			ops.restart("us-1")
		case step == "RemovingSource" && sourceStep == "TrafficRemoved" && !killed["eu-1"]:
			killed["eu-1"] = true
			ops.restart("eu-1")
		}
		if cellNow == "us-1" && step == "" {
			break
		}
		if time.Now().After(deadline) {
			fatalf(t, "the move of %s: cell %q, step %q, source step %q after 5m", code, cellNow, step, sourceStep)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(killed) != 3 {
		t.Errorf("operators killed during the move: %v; want the fleet's, the target's and the source's", killed)
	}
	kubectlWaitReady(t, 3*time.Minute, moving)
	for name, c := range clusters {
		waitDelivered(t, c, name, code, modules, name == "us-1")
		if got := trees.holds(t, name, code); got != (name == "us-1") {
			t.Errorf("after the move, the %s tree holds %s: %v", name, code, got)
		}
	}
	if n := trees.publishes(t, "us-1", code); n != 1 && n != -1 {
		t.Errorf("%s published %d times on us-1, want once", code, n)
	}
	if window.neither > 0 {
		t.Errorf("no cell served %s for %s of its move", code, window.neither.Round(time.Millisecond))
	}
	if kept := modulesOff.Sub(trafficOff); kept < drain {
		t.Errorf("the source's modules stopped %s after its Ingress went; want the drain, %s, at least", kept.Round(time.Millisecond), drain)
	}

	undoMove(t, staying, cell.Client, trees)

	// The us-1 operator decommissions it from the record the move handed over.
	deleteAndWaitGone(t, 3*time.Minute, moving)
	waitDelivered(t, cell.Client, "us-1", code, modules, false)
	if trees.holds(t, "us-1", code) {
		t.Errorf("%s deleted: the us-1 tree still holds it", code)
	}
	if err := deliveredOn(ctx, cell.Client, codeOf(staying), modules, true); err != nil {
		t.Errorf("%s, never moved, on us-1: %v", codeOf(staying), err)
	}
	t.Logf("operators killed during the move: %v; %s; the source's modules ran %s after its Ingress went",
		killed, &window, modulesOff.Sub(trafficOff).Round(100*time.Millisecond))
}

// undoMove starts a move of tn, served by us-1, to eu-1, and pins it back to us-1 as
// soon as eu-1 published it: eu-1 takes its copy out of its tree and cluster, and us-1
// serves the tenant throughout.
func undoMove(t *testing.T, tn *unstructured.Unstructured, us client.Client, trees cellTrees) {
	t.Helper()
	ctx := context.Background()
	code := codeOf(tn)
	modules := len(tenant.DefaultCatalog().ModulesOf("Starter"))
	pinTo(t, tn, "eu-1")
	pinnedBack := false
	deadline := time.Now().Add(within(t, 3*time.Minute))
	for {
		if !servingOn(ctx, us, code) {
			t.Fatalf("%s: us-1 stopped serving it during a move that was undone", code)
		}
		u, err := current(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		step, _, _ := unstructured.NestedString(u.Object, "status", "move", "step")
		published, _, _ := unstructured.NestedString(u.Object, "status", "move", "targetPublished", "revision")
		switch {
		case step == "RemovingSource":
			t.Fatalf("%s: the move went on to RemovingSource though it was pinned back while the target provisioned", code)
		case !pinnedBack && published != "":
			pinTo(t, tn, "us-1")
			pinnedBack = true
		case pinnedBack && step == "":
			waitDelivered(t, cluster.Client, "eu-1", code, modules, false)
			if trees.holds(t, "eu-1", code) {
				t.Errorf("%s: its undone move left it in the eu-1 tree", code)
			}
			if n, _ := countEvents(t, tn.GetNamespace(), tn.GetName(), "MoveCancelled"); n == 0 {
				t.Errorf("%s: no MoveCancelled event", code)
			}
			if cellNow, _ := cellOf(t, tn); cellNow != "us-1" {
				t.Errorf("%s after its undone move is on cell %q", code, cellNow)
			}
			return
		}
		if time.Now().After(deadline) {
			fatalf(t, "the undone move of %s: step %q, pinned back %v, after 3m", code, step, pinnedBack)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pinTo sets the tenant's spec.placement to one cell.
func pinTo(t *testing.T, tn *unstructured.Unstructured, cell string) {
	t.Helper()
	// The operators write the tenant's status meanwhile: a conflict is read again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := current(context.Background(), tn)
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedField(got.Object, map[string]any{"cell": cell}, "spec", "placement")
		return cluster.Client.Update(context.Background(), got)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitDelivered waits until the tenant is delivered on cluster c (named name), or, with
// want false, until nothing of it is left there.
func waitDelivered(t *testing.T, c client.Client, name, code string, modules int, want bool) {
	t.Helper()
	deadline := time.Now().Add(within(t, 2*time.Minute))
	for {
		err := deliveredOn(context.Background(), c, code, modules, want)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s (delivered: want %v): %v", code, name, want, err)
		}
		time.Sleep(time.Second)
	}
}

// gitTrees are the cells' folders of the branch main of a bare repository.
type gitTrees string

func (g gitTrees) holds(t *testing.T, cell, code string) bool {
	t.Helper()
	out, err := exec.Command("git", "-C", string(g), "ls-tree", "main", "--", tenantFolder("cells/"+cell, code)).Output()
	if err != nil {
		t.Fatalf("git ls-tree: %v", err)
	}
	return strings.TrimSpace(string(out)) != ""
}

func (g gitTrees) publishes(t *testing.T, cell, code string) int {
	t.Helper()
	out, err := exec.Command("git", "-C", string(g), "log", "--format=%h", "main", "--", tenantFolder("cells/"+cell, code)).Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// ociTrees are the cells' artifacts below one reference (publish.CellRef).
type ociTrees string

func (o ociTrees) holds(t *testing.T, cell, code string) bool {
	t.Helper()
	tree, _, err := (&publish.OCI{Ref: publish.CellRef(string(o), "cells/"+cell), Insecure: true}).Read(context.Background())
	if err != nil {
		t.Fatalf("reading cell %s's artifact: %v", cell, err)
	}
	for file := range tree {
		if strings.HasPrefix(file, tenantFolder("", code)+"/") {
			return true
		}
	}
	return false
}

func (ociTrees) publishes(*testing.T, string, string) int { return -1 }

// tenantFolder is the tenant's folder in a tree at root.
func tenantFolder(root, code string) string {
	return path.Join(root, render.TenantsDir, render.DirName(code))
}
