package controller

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidonow/eva/internal/tenant"
)

// The cache's copy of a HelmRelease has the driftVersion of the object it was cut from,
// however many times client-go ran the transform over it, and a change of a label the
// cut drops changes it.
func TestStatusOnlyKeepsTheVersionOfWhatItCut(t *testing.T) {
	gvk := helmv2.GroupVersion.WithKind("HelmRelease")
	full := func() *helmv2.HelmRelease {
		return &helmv2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "crm", Namespace: "eva-tenant-abcdef", UID: "u1", Generation: 3,
			Labels:      map[string]string{tenant.LabelCapsule: "ABCDEF", "sharding.fluxcd.io/key": "shard-1"},
			Annotations: map[string]string{tenant.AnnotationOwnerUID: "t1", "other": "x"}}}
	}
	want := driftVersion(gvk, full(), false)
	transform := statusOnly()
	for _, passes := range []int{1, 2, 3} {
		obj := any(full())
		for range passes {
			var err error
			if obj, err = transform(obj); err != nil {
				t.Fatal(err)
			}
		}
		if got := driftVersion(gvk, obj.(*helmv2.HelmRelease), true); got != want {
			t.Errorf("after %d passes: %q, want %q", passes, got, want)
		}
	}
	moved := full()
	moved.Labels["sharding.fluxcd.io/key"] = "shard-2"
	cut, err := transform(moved)
	if err != nil {
		t.Fatal(err)
	}
	if got := driftVersion(gvk, cut.(*helmv2.HelmRelease), true); got == want {
		t.Error("a changed shard label left the version as it was")
	}
}

// Two sets of annotations that spell the same bytes when joined (a value holding what a
// separator would be) have different digests: an edit cannot hide behind one.
func TestMetadataDigestTellsApartWhatJoinsAlike(t *testing.T) {
	owner, digest := tenant.AnnotationOwnerUID, tenant.AnnotationSpecDigest
	applied := map[string]string{owner: "t1", digest: "sha256:1"}
	forged := map[string]string{owner: "t1\x00" + digest + "\x00sha256:1"}
	if metadataDigest(nil, applied) == metadataDigest(nil, forged) {
		t.Error("annotations folded into one value have the digest of the annotations they spell")
	}
	if metadataDigest(map[string]string{"a": "b"}, nil) == metadataDigest(nil, map[string]string{"a": "b"}) {
		t.Error("a label and an annotation of the same key and value have one digest")
	}
}
