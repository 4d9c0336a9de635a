package cli

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-git/go-git/v5"
	"github.com/google/go-containerregistry/pkg/registry"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/tenant"
)

// TestCellTreesMoveATenantFile moves a published tenant file from cell eu-1 to us-1
// with publish git, each cell an API server of its own on which the test plays Flux
// (fluxStandIn): the move starts with both cells holding the tenant and the source's
// tree recording the move; evactl waits, and says why, while it may not read a cell
// or the target is not Active by the operator's rules; a placement changed again
// mid-move is refused at its line; then the source's copy goes through the
// decommission saga's steps, each published once that cell's Flux applied the one
// before, its traffic first and its drain waited out, until the move record goes
// with the copy. validate and cells read the move from the branch throughout.
func TestCellTreesMoveATenantFile(t *testing.T) {
	tenants, overlays := cellsFleet(t, 4, "")
	eu, us := startCellCluster(t), startCellCluster(t)
	bare := filepath.Join(t.TempDir(), "fleet.git")
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	target := []string{"--repo", bare, "--branch", "main", "--path", "clusters/dev", "--cache-dir", filepath.Join(t.TempDir(), "cache")}
	inputs := append([]string{"--tenants", tenants, "--overlays", overlays, "--verify-charts=false"}, target...)
	kube := []string{"--cell-kubeconfig", "eu-1=" + eu.kubeconfig, "--cell-kubeconfig", "us-1=" + us.kubeconfig}
	publish := func(want string, extra ...string) string {
		t.Helper()
		code, msg := runEvactl(t, append(append([]string{"publish", "git"}, inputs...), extra...)...)
		if code != ExitOK || !strings.Contains(msg, want) {
			t.Fatalf("publish git %v: exit %d, want %q in:\n%s", extra, code, want, msg)
		}
		return gitOut(t, bare, "rev-parse", "main")
	}
	const euTree, usTree = "clusters/dev/cells/eu-1", "clusters/dev/cells/us-1"
	show := func(rev, tree, file string) string {
		return gitOut(t, bare, "show", rev+":"+path.Join(tree, "tenants/cellab", file))
	}
	holds := func(rev, tree string) bool {
		return strings.Contains(gitOut(t, bare, "ls-tree", "-r", "--name-only", rev, tree+"/tenants/"), "tenants/cellab/")
	}

	fromBranch := func(tree, rev string) func(string) string {
		return func(file string) string { return gitOut(t, bare, "show", rev+":"+path.Join(tree, file)) }
	}
	head := publish("eu-1 ")
	eu.fluxStandIn(t, fromBranch(euTree, head), "CELLAB", "main@sha1:"+head)

	writeCellTenant(t, tenants, "CELLAB", "  placement:\n    labels: {region: us}\n")
	head = publish("move of CELLAB from cell eu-1 to us-1: starts: cell eu-1's tree records it; cell us-1 gets the tenant with the next publish")
	if holds(head, usTree) {
		t.Fatal("a move starts with its record alone: a run stopped between two cells' publishes must leave no tenant in two trees without one")
	}
	// A forged record is not trusted further than its tree shows: one that says the
	// source's live copy is Decommissioned; one beside a copy whose Ingress only Eva's
	// own encoding would miss (quoted: kustomize still reads an Ingress); one in a tree
	// without the tenant.
	quoted := strings.Replace(show(head, euTree, "workloads/manifests.yaml"), "\nkind: Ingress\n", "\nkind: \"Ingress\"\n", 1)
	for name, forged := range map[string]struct {
		files map[string]string
		want  string
	}{
		"a later step": {map[string]string{euTree + "/tenants/cellab/move.json": `{"to": "us-1", "step": "NamespaceOnly"}`},
			"the record says step NamespaceOnly, but its copy still has its Ingress: it was not published by evactl"},
		"an Ingress quoted": {map[string]string{euTree + "/tenants/cellab/move.json": `{"to": "us-1", "step": "TrafficRemoved"}`,
			euTree + "/tenants/cellab/workloads/manifests.yaml": quoted},
			"the record says step TrafficRemoved, but its copy still has its Ingress: it was not published by evactl"},
		"no copy": {map[string]string{usTree + "/tenants/cellac/move.json": `{"to": "eu-1"}`}, "a move record without the tenant's copy beside it"},
	} {
		restore := pushFiles(t, bare, forged.files)
		code, msg := runEvactl(t, append(append([]string{"publish", "git"}, inputs...), kube...)...)
		if code == ExitOK || !strings.Contains(msg, forged.want) {
			t.Fatalf("a forged record, %s: exit %d, want %q in:\n%s", name, code, forged.want, msg)
		}
		restore()
	}
	head = publish("move of CELLAB from cell eu-1 to us-1: at step ProvisioningTarget; evactl reads cell us-1's cluster to go on: pass --cell-kubeconfig us-1=FILE")
	if !hasKind(show(head, usTree, "workloads/manifests.yaml"), "Ingress") || !hasKind(show(head, euTree, "workloads/manifests.yaml"), "Ingress") {
		t.Fatal("while the target provisions, both cells serve the tenant")
	}
	if rec := readRecord(t, show(head, euTree, moveRecordFile)); rec.To != "us-1" || rec.Step != "" {
		t.Fatalf("the source's record: %+v", rec)
	}

	// validate and cells read the move from the branch: the tenant is on its target,
	// and claims room on both cells until its source's copy is out.
	if code, msg := runEvactl(t, append([]string{"validate", tenants, "--overlays", overlays, "--verify-charts=false"}, target...)...); code != ExitOK {
		t.Fatalf("validate of a tenant moving: exit %d\n%s", code, msg)
	}
	report := cellsOnBranch(t, tenants, overlays, target)
	if report.Placements["CELLAB"] != "us-1" || report.Cells[0].Tenants != 3 || report.Cells[1].Tenants != 2 {
		t.Fatalf("cells while moving: placements %v, cells %+v", report.Placements, report.Cells)
	}

	// It waits, and says why: a target not yet Active, or a kubeconfig of another cell.
	publish("waiting for it to be Active on cell us-1: NamespaceReady: namespace not found", kube...)

	// A move is neither undone nor redirected: refused at the placement's line.
	writeCellTenant(t, tenants, "CELLAB", "  placement:\n    labels: {region: eu}\n")
	code, msg := runEvactl(t, append(append([]string{"publish", "git"}, inputs...), kube...)...)
	if want := "CELLAB.yaml:19:3: spec.placement: environment dev: CELLAB is moving from cell eu-1 to us-1 (step ProvisioningTarget), which its placement no longer allows"; code != ExitInvalid || !strings.Contains(msg, want) {
		t.Fatalf("a move redirected: exit %d, want %q in:\n%s", code, want, msg)
	}
	writeCellTenant(t, tenants, "CELLAB", "  placement:\n    labels: {region: us}\n")

	// The cell eu-1 serves the tenant: read as us-1, it is another cell.
	publish("the cluster --cell-kubeconfig us-1 names applies ./clusters/dev/cells/eu-1/tenants/cellab for Kustomization flux-system/eva-tenant-cellab, not cell us-1's ./clusters/dev/cells/us-1/tenants/cellab: is it another cell's?",
		"--cell-kubeconfig", "us-1="+eu.kubeconfig)

	// Active on the target: the source's traffic goes first.
	us.fluxStandIn(t, fromBranch(usTree, head), "CELLAB", "main@sha1:"+head)
	head = publish("Active on cell us-1; step TrafficRemoved: its Ingress goes from cell eu-1", kube...)
	if hasKind(show(head, euTree, "workloads/manifests.yaml"), "Ingress") || !hasKind(show(head, usTree, "workloads/manifests.yaml"), "Ingress") {
		t.Fatal("TrafficRemoved: the source's Ingress must go, the target's stay")
	}
	publish("waiting for Kustomization flux-system/eva-tenant-cellab-workloads to apply", kube...)

	// eu-1's Flux applied it: the drain starts, and is waited out.
	eu.prune(t, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: tenant.Namespace("CELLAB"), Name: tenant.IngressName("CELLAB")}})
	eu.applied(t, "CELLAB", "main@sha1:"+head)
	head = publish("its traffic is off cell eu-1; draining until", append(kube, "--move-drain", "1h")...)
	if rec := readRecord(t, show(head, euTree, moveRecordFile)); rec.Step != "TrafficRemoved" || rec.TrafficMovedAt == nil {
		t.Fatalf("the drain's start is recorded: %+v", rec)
	}
	eu.applied(t, "CELLAB", "main@sha1:"+head)
	if publish("draining until", append(kube, "--move-drain", "1h")...) != head {
		t.Fatal("a move waiting out its drain published something")
	}

	// Then the rest of the source's copy, step by step.
	head = publish("step StreamsRemoved on cell eu-1", append(kube, "--move-drain", "0s")...)
	if hasKind(show(head, euTree, "manifests.yaml"), "Stream") {
		t.Fatal("StreamsRemoved: the source's streams must go")
	}
	eu.applied(t, "CELLAB", "main@sha1:"+head)
	publish("waiting for Stream ", append(kube, "--move-drain", "0s")...)
	ns := tenant.Namespace("CELLAB")
	eu.prune(t, &nackv1beta2.Stream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.StreamObjectName(tenant.EventsStream("CELLAB"))}},
		&nackv1beta2.Stream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.StreamObjectName(tenant.CommandsStream("CELLAB"))}})
	head = publish("step ReleasesRemoved on cell eu-1", append(kube, "--move-drain", "0s")...)
	eu.applied(t, "CELLAB", "main@sha1:"+head)
	publish("waiting for HelmReleases to be uninstalled: crm, itsm", append(kube, "--move-drain", "0s")...)
	if err := eu.c.DeleteAllOf(context.Background(), &helmv2.HelmRelease{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err) // helm-controller uninstalled them
	}
	head = publish("step NamespaceOnly on cell eu-1", append(kube, "--move-drain", "0s")...)
	if !strings.Contains(show(head, euTree, "manifests.yaml"), "eva.aidonow.com/lifecycle: Decommissioned") {
		t.Fatal("NamespaceOnly: the source's copy is the Decommissioned bundle")
	}
	eu.applied(t, "CELLAB", "main@sha1:"+head)
	head = publish("its copy leaves cell eu-1", append(kube, "--move-drain", "0s")...)
	if holds(head, euTree) || !holds(head, usTree) {
		t.Fatal("the move is over: the tenant is in us-1's tree alone")
	}

	report = cellsOnBranch(t, tenants, overlays, target)
	if report.Placements["CELLAB"] != "us-1" || report.Cells[0].Tenants != 2 || report.Cells[1].Tenants != 2 {
		t.Fatalf("cells after the move: placements %v, cells %+v", report.Placements, report.Cells)
	}
	if code, msg := runEvactl(t, append([]string{"diff", "--exit-code"}, inputs...)...); code != ExitOK || !strings.Contains(msg, "no changes") {
		t.Fatalf("diff after the move: exit %d\n%s", code, msg)
	}
}

// readRecord decodes a move record as published.
func readRecord(t *testing.T, data string) moveRecord {
	t.Helper()
	var rec moveRecord
	if err := json.Unmarshal([]byte(data), &rec); err != nil {
		t.Fatalf("move record %q: %v", data, err)
	}
	return rec
}

// cellsOnBranch is evactl cells -o json with the record read from the published branch.
func cellsOnBranch(t *testing.T, tenants, overlays string, target []string) cellReport {
	t.Helper()
	code, out := runEvactl(t, append([]string{"cells", "--tenants", tenants, "--overlays", overlays, "-o", "json"}, slices.Clone(target[:6])...)...)
	var report cellReport
	if err := json.Unmarshal([]byte(out), &report); code != ExitOK || err != nil {
		t.Fatalf("cells --repo: exit %d, %v\n%s", code, err, out)
	}
	return report
}

// TestCellTreesMoveInOCIMode starts a tenant file's move with publish oci, one artifact
// per cell: the source's artifact records it beside its whole copy, the target's holds
// the tenant; the target is judged Active from the revision its Flux applied as an
// OCIRepository names it (<tag>@sha256:<digest>), read back from the registry, and the
// source's traffic then goes.
func TestCellTreesMoveInOCIMode(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	tenants, overlays := cellsFleet(t, 3, "")
	us := startCellCluster(t)
	asOCISource(t, overlays)
	args := []string{"publish", "oci", "--ref", "oci://" + host + "/eva/tenants:dev", "--insecure", "--revision", "main@sha1:abc",
		"--source", "https://example.com/t.git", "--tenants", tenants, "--overlays", overlays, "--verify-charts=false"}
	publishOCI := func(want string, extra ...string) {
		t.Helper()
		if code, msg := runEvactl(t, append(slices.Clone(args), extra...)...); code != ExitOK || !strings.Contains(msg, want) {
			t.Fatalf("publish oci %v: exit %d, want %q in:\n%s", extra, code, want, msg)
		}
	}
	read := func(cell string) (map[string][]byte, string) {
		t.Helper()
		o := &publish.OCI{Ref: host + "/eva/tenants/cells/" + cell + ":dev", Insecure: true}
		tree, digest, err := o.Read(context.Background())
		if err != nil || digest == "" {
			t.Fatalf("reading cell %s's artifact: %q, %v", cell, digest, err)
		}
		return tree, digest
	}
	publishOCI("eu-1 ")
	writeCellTenant(t, tenants, "CELLAB", "  placement:\n    labels: {region: us}\n")
	publishOCI("move of CELLAB from cell eu-1 to us-1: starts")
	eu, _ := read("eu-1")
	if rec := readRecord(t, string(eu["tenants/cellab/move.json"])); rec.To != "us-1" || !hasKind(string(eu["tenants/cellab/workloads/manifests.yaml"]), "Ingress") {
		t.Fatalf("the source's artifact: record %+v, files %v", rec, slices.Sorted(maps.Keys(eu)))
	}
	kube := []string{"--cell-kubeconfig", "us-1=" + us.kubeconfig}
	publishOCI("waiting for it to be Active on cell us-1", kube...)
	tree, digest := read("us-1")
	us.fluxStandIn(t, func(file string) string { return string(tree[file]) }, "CELLAB", "dev@"+digest)
	publishOCI("Active on cell us-1; step TrafficRemoved", kube...)
	if eu, _ = read("eu-1"); hasKind(string(eu["tenants/cellab/workloads/manifests.yaml"]), "Ingress") {
		t.Fatal("TrafficRemoved: the source's Ingress must go")
	}
}

// TestCellTreesMoveRefusedWithArgoCD: evactl moves tenant files only between cells
// that Flux delivers; with Argo CD the placement change is refused at its line.
func TestCellTreesMoveRefusedWithArgoCD(t *testing.T) {
	tenants, overlays := cellsFleet(t, 3, "")
	settings := filepath.Join(overlays, "dev", "tenant", "environment.yaml")
	data, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	// Argo CD does not decrypt SOPS: the environment's recipients go.
	kept := regexp.MustCompile(`(?m)^secrets:\n(?:[ #].*\n)*`).ReplaceAll(data, nil)
	if err := os.WriteFile(settings, kept, 0o644); err != nil {
		t.Fatal(err)
	}
	appendToFile(t, settings, "applier: argocd\nargocd: {repoURL: 'https://git.example.com/t.git', chartRepository: 'registry.example.com/eva/charts'}\n")
	out := filepath.Join(t.TempDir(), "gitops")
	if code, msg := runEvactl(t, "render", "--tenants", tenants, "--overlays", overlays, "--out", out, "--verify-charts=false", "-q"); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, msg)
	}
	writeCellTenant(t, tenants, "CELLAB", "  placement:\n    labels: {region: us}\n")
	want := "CELLAB.yaml:19:3: spec.placement: environment dev: CELLAB is published on cell eu-1, which its placement no longer allows; evactl moves tenant files between cells that Flux delivers, not Argo CD"
	if code, msg := runEvactl(t, "validate", tenants, "--overlays", overlays, "--verify-charts=false", "--published", out); code != ExitInvalid || !strings.Contains(msg, want) {
		t.Fatalf("validate of a move with Argo CD: exit %d, want %q in:\n%s", code, want, msg)
	}
}

// pushFiles commits files (path below the repository → content) to the branch main of
// bare as someone else would, and returns what puts the branch's tree back as it was.
func pushFiles(t *testing.T, bare string, files map[string]string) (restore func()) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	gitOut(t, t.TempDir(), "clone", "-q", "-b", "main", bare, work)
	commit := func(msg string) {
		gitOut(t, work, "add", "-A")
		gitOut(t, work, "-c", "user.name=someone", "-c", "user.email=someone@example.com", "commit", "-qm", msg)
		gitOut(t, work, "push", "-q", "origin", "HEAD:main")
	}
	old := map[string][]byte{} // nil: the file was not there
	for file, body := range files {
		p := filepath.Join(work, filepath.FromSlash(file))
		data, err := os.ReadFile(p)
		if err == nil {
			old[p] = data
		} else {
			old[p] = nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit("forged")
	return func() {
		t.Helper()
		for p, data := range old {
			var err error
			if data == nil {
				err = os.Remove(p)
			} else {
				err = os.WriteFile(p, data, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		commit("restored")
	}
}

// TestMoveReportEscapesClusterText: what a move waits for quotes the cells' clusters (a
// release's Ready message can hold text a tenant's values put there); the report shows
// it on its own line, a newline or a terminal escape written out, so a CI log takes no
// workflow command or repaint from it.
func TestMoveReportEscapesClusterText(t *testing.T) {
	j := &job{moves: map[string]*fileMove{"ABCDEF": {code: "ABCDEF", from: "eu-1", next: moveRecord{To: "us-1"},
		message: "waiting: HelmRelease eva-tenant-abcdef/crm: InstallFailed: bad value\n::error file=x::forged\x1b[2J"}}}
	var out strings.Builder
	j.reportMoves(&out)
	got := out.String()
	if strings.Count(got, "\n") != 1 || strings.Contains(got, "\x1b") ||
		!strings.Contains(got, `bad value\n::error file=x::forged\x1b[2J`) {
		t.Fatalf("the move report:\n%q", got)
	}
}
