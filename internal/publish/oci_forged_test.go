package publish

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
)

// plantedBinding is what a hostile registry writer adds to a tenant's foundation.
const plantedBinding = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: planted
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: eva-tenant-forgaa}]
`

// layerDigest returns the digest of the single layer the tag points at.
func layerDigest(t *testing.T, ref name.Reference) v1.Hash {
	t.Helper()
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("%s has %d layers", ref, len(m.Layers))
	}
	return m.Layers[0].Digest
}

// TestOCIForgedArtifactIsReplaced: the tag is rewritten with a layer holding a planted
// ClusterRoleBinding but the manifest annotations Eva wrote (tree digest, source,
// revision, created). The next publish of the same render must not call it current: it
// pushes Eva's own artifact again.
func TestOCIForgedArtifactIsReplaced(t *testing.T) {
	ctx := context.Background()
	host, _ := loopbackRegistry(t)
	o := &OCI{Ref: "oci://" + host + "/eva/tenants:dev", Insecure: true,
		Source: "https://git.example.com/eva/tenants", Revision: "main@sha1:0123456789abcdef"}
	first, err := o.Publish(ctx, renderUpdate(t, true, codes("FORG", 2)...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/eva/tenants:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	evaLayer := layerDigest(t, ref)

	// Forge: same manifest annotations, a tampered layer.
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	tree, err := o.Pull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tampered := false
	for p := range tree {
		if strings.HasSuffix(p, "/forgaa/manifests.yaml") {
			tree[p] = append(tree[p], plantedBinding...)
			tampered = true
		}
	}
	if !tampered {
		t.Fatal("no manifests.yaml of tenant forgaa in the artifact")
	}
	layer, err := Tarball(tree)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, FluxConfigMediaType), m.MediaType),
		mutate.Addendum{Layer: static.NewLayer(layer, FluxContentMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	forged = mutate.Annotations(forged, m.Annotations).(v1.Image)
	if err := remote.Write(ref, forged); err != nil {
		t.Fatal(err)
	}
	if got := layerDigest(t, ref); got == evaLayer {
		t.Fatal("the forged layer has Eva's digest: the test did not tamper with anything")
	}

	again, err := (&OCI{Ref: o.Ref, Insecure: true, Source: o.Source, Revision: o.Revision}).Publish(ctx, renderUpdate(t, true, codes("FORG", 2)...), Safety{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Committed {
		t.Errorf("a forged artifact with Eva's annotations was reported current (%s); nothing was pushed", again.Revision)
	}
	if got := layerDigest(t, ref); got != evaLayer {
		t.Errorf("the tag holds layer %s after the publish, want Eva's %s", got, evaLayer)
	}
	if again.Revision != first.Revision {
		t.Errorf("republished digest %s, want the first publish's %s", again.Revision, first.Revision)
	}
}
