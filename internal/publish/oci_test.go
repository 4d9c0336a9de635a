package publish

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/aidonow/eva/internal/render"
)

// loopbackRegistry runs go-containerregistry's registry on loopback and counts the
// requests that upload something.
func loopbackRegistry(t testing.TB) (host string, uploads *atomic.Int64) {
	t.Helper()
	uploads = &atomic.Int64{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			uploads.Add(1)
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), uploads
}

func treeOfUpdate(t *testing.T, u Update) map[string][]byte {
	t.Helper()
	tree := map[string][]byte{}
	var codes []string
	for _, files := range u.Tenants {
		for _, f := range files {
			tree[f.Path] = f.Data
		}
	}
	for d := range u.Tenants {
		codes = append(codes, strings.ToUpper(d))
	}
	root := render.RootKustomizationFile(render.FluxDir, codes)
	tree[root.Path] = root.Data
	return tree
}

func TestOCIPublishPullAndReproducibility(t *testing.T) {
	ctx := context.Background()
	host, uploads := loopbackRegistry(t)
	o := &OCI{Ref: "oci://" + host + "/eva/tenants:dev", Insecure: true,
		Source: "https://git.example.com/eva/tenants", Revision: "main@sha1:0123456789abcdef"}
	u := renderUpdate(t, true, codes("OCIX", 4)...)

	res, err := o.Publish(ctx, u, Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || !strings.HasPrefix(res.Revision, "sha256:") {
		t.Fatalf("first publish: %+v", res)
	}

	// Pull back with the registry client directly and compare with the render.
	ref, _ := name.ParseReference(host+"/eva/tenants:dev", name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	manifest, _ := img.Manifest()
	if manifest.Config.MediaType != FluxConfigMediaType || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != FluxContentMediaType {
		t.Fatalf("not Flux's artifact format: config %s, layers %v", manifest.Config.MediaType, manifest.Layers)
	}
	for k, want := range map[string]string{AnnotationSource: o.Source, AnnotationRevision: o.Revision, AnnotationCreated: "1970-01-01T00:00:00Z"} {
		if got := manifest.Annotations[k]; got != want {
			t.Errorf("annotation %s = %q, want %q", k, got, want)
		}
	}
	rc, _ := img.Layers()
	body, _ := rc[0].Uncompressed()
	pulled, err := Untar(body)
	if err != nil {
		t.Fatal(err)
	}
	want := treeOfUpdate(t, u)
	if len(pulled) != len(want) {
		t.Fatalf("artifact holds %d files, the render %d", len(pulled), len(want))
	}
	for p, data := range want {
		if string(pulled[p]) != string(data) {
			t.Errorf("%s differs between the artifact and the render", p)
		}
	}

	// The same render again: same digest, nothing uploaded.
	before := uploads.Load()
	again, err := (&OCI{Ref: o.Ref, Insecure: true, Source: o.Source, Revision: o.Revision}).Publish(ctx, renderUpdate(t, true, codes("OCIX", 4)...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Revision != res.Revision || again.Committed {
		t.Fatalf("unchanged render: digest %s (was %s), committed %v", again.Revision, res.Revision, again.Committed)
	}
	if n := uploads.Load() - before; n != 0 {
		t.Fatalf("an unchanged publish made %d upload requests", n)
	}

	// One tenant changes: a new digest, and only that tenant in the plan.
	specs := codes("OCIX", 4)
	specs[1].replicas = 2
	changed, err := o.Publish(ctx, renderUpdate(t, true, specs...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if changed.Revision == res.Revision || strings.Join(changed.Plan.Changed, ",") != "ocixab" {
		t.Fatalf("changed publish: %+v %+v", changed, changed.Plan)
	}
}

func TestOCIPublishSafety(t *testing.T) {
	ctx := context.Background()
	host, _ := loopbackRegistry(t)
	o := &OCI{Ref: host + "/eva/tenants:prod", Insecure: true}
	if _, err := o.Publish(ctx, renderUpdate(t, true, codes("SAFO", 3)...), Safety{}); err != nil {
		t.Fatal(err)
	}
	_, err := o.Publish(ctx, Update{Tenants: map[string][]render.File{}, Full: true}, Safety{})
	if err == nil || !strings.Contains(err.Error(), "SAFOAA") {
		t.Fatalf("empty render over a published artifact: %v", err)
	}
	_, err = o.Publish(ctx, renderUpdate(t, true, codes("SAFO", 2)...), Safety{})
	if err == nil || !strings.Contains(err.Error(), "SAFOAC") {
		t.Fatalf("removing an active tenant: %v", err)
	}
}

func TestTarballIsReproducible(t *testing.T) {
	tree := map[string][]byte{"b/x.yaml": []byte("b"), "a.yaml": []byte("a"), "b/c/y.yaml": []byte("c")}
	one, err := Tarball(tree)
	if err != nil {
		t.Fatal(err)
	}
	two, _ := Tarball(map[string][]byte{"b/c/y.yaml": []byte("c"), "a.yaml": []byte("a"), "b/x.yaml": []byte("b")})
	if string(one) != string(two) {
		t.Fatal("the same tree gave two different tarballs")
	}
}

// TestOCIWritersDoNotLoseEachOther: two operators (partial updates) publish different
// tenants to one tag, the second pushing in the middle of the first's publish (right
// before the first pushes). The first sees the tag moved, merges again onto it, and the
// artifact ends up holding both tenants.
func TestOCIWritersDoNotLoseEachOther(t *testing.T) {
	ctx := context.Background()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var interfered atomic.Bool
	var other func()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first writer's check of the tag before its push: let the other writer
		// publish now.
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") && interfered.CompareAndSwap(false, true) {
			other()
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/eva/tenants:dev"
	first := &OCI{Ref: ref, Insecure: true}
	second := &OCI{Ref: ref, Insecure: true}
	other = func() {
		if _, err := second.Publish(ctx, renderUpdate(t, false, codes("OCIB", 1)...), Safety{}); err != nil {
			t.Errorf("the other writer: %v", err)
		}
	}
	res, err := first.Publish(ctx, renderUpdate(t, false, codes("OCIA", 1)...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if !interfered.Load() {
		t.Fatal("the other writer never ran: the test did not test anything")
	}
	if res.Attempts != 2 {
		t.Errorf("first writer: %d attempts, want 2 (one lost to the other writer)", res.Attempts)
	}
	tree, err := first.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"ociaaa", "ocibaa"} {
		found := false
		for p := range tree {
			found = found || strings.Contains(p, "/"+dir+"/")
		}
		if !found {
			t.Errorf("tenant %s missing from the artifact: a writer's work was lost (files: %d)", dir, len(tree))
		}
	}
}
