package publish

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
)

// plantedEntry is one entry a hostile writer adds to an artifact's tarball.
type plantedEntry struct {
	name     string
	typeflag byte
	data     string
	link     string
}

// plantArtifact rewrites the tag ref with the tree it holds plus the planted entries,
// keeping the manifest's annotations, and returns the new digest.
func plantArtifact(t *testing.T, o *OCI, ref name.Reference, planted []plantedEntry) v1.Hash {
	t.Helper()
	tree, err := o.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, p := range slices.Sorted(maps.Keys(tree)) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(tree[p])), Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(tree[p]); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range planted {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: 0o644, Linkname: e.link, Format: tar.FormatPAX}
		if e.typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, FluxConfigMediaType), m.MediaType),
		mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), FluxContentMediaType)})
	if err != nil {
		t.Fatal(err)
	}
	forged = mutate.Annotations(forged, m.Annotations).(v1.Image)
	if err := remote.Write(ref, forged); err != nil {
		t.Fatal(err)
	}
	digest, err := forged.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

// TestOCIRefusesForeignEntries: an artifact on the tag whose tree holds what Eva does
// not publish (under tenants/ a folder that is not a capsule code, one whose name has a
// newline, a file; a link anywhere; a file where Eva's folders go) is refused by a
// publish, naming the entry and the reason, as the git publisher refuses such a
// branch: nothing is pushed, and evactl diff's Pull refuses it too.
func TestOCIRefusesForeignEntries(t *testing.T) {
	ctx := context.Background()
	for label, tc := range map[string]struct {
		planted []plantedEntry
		want    []string
	}{
		"folder not a code": {
			planted: []plantedEntry{{name: "tenants/not-a-code/x.yaml", typeflag: tar.TypeReg, data: "kind: ClusterRoleBinding\n"}},
			want:    []string{"tenants/not-a-code", "not a capsule code"},
		},
		"empty folder not a code": {
			planted: []plantedEntry{{name: "tenants/not-a-code/", typeflag: tar.TypeDir}},
			want:    []string{"tenants/not-a-code", "not a capsule code"},
		},
		"folder with a newline": {
			planted: []plantedEntry{{name: "tenants/abcdef\n- planted/manifests.yaml", typeflag: tar.TypeReg, data: "kind: ClusterRoleBinding\n"}},
			want:    []string{`tenants/abcdef\n- planted`, "not a capsule code"},
		},
		"file under tenants": {
			planted: []plantedEntry{{name: "tenants/file.yaml", typeflag: tar.TypeReg, data: "x: 1\n"}},
			want:    []string{"tenants/file.yaml", "not a folder"},
		},
		"file listed again as a folder": {
			planted: []plantedEntry{
				{name: "tenants/hostaa/manifests.yaml/", typeflag: tar.TypeDir},
				{name: "tenants/hostaa/manifests.yaml/x.yaml", typeflag: tar.TypeReg, data: "x: 1\n"},
			},
			want: []string{"tenants/hostaa/manifests.yaml", "listed twice"},
		},
		"file where tenants/ goes": {
			planted: []plantedEntry{{name: "tenants", typeflag: tar.TypeReg, data: "x: 1\n"}},
			want:    []string{"tenants", "not a folder"},
		},
		"symlink in a tenant": {
			planted: []plantedEntry{{name: "tenants/hostaa/link.yaml", typeflag: tar.TypeSymlink, link: "/etc/passwd"}},
			want:    []string{"tenants/hostaa/link.yaml", "a symbolic link"},
		},
		"hard link in a tenant": {
			planted: []plantedEntry{{name: "tenants/hostaa/hard.yaml", typeflag: tar.TypeLink, link: "kustomization.yaml"}},
			want:    []string{"tenants/hostaa/hard.yaml", "a hard link"},
		},
		"FIFO at the root": {
			planted: []plantedEntry{{name: "fifo", typeflag: tar.TypeFifo}},
			want:    []string{"fifo", "a FIFO"},
		},
		"file inside a file": {
			planted: []plantedEntry{{name: "tenants/hostaa/manifests.yaml/x.yaml", typeflag: tar.TypeReg, data: "x: 1\n"}},
			want:    []string{"tenants/hostaa/manifests.yaml", "not a folder"},
		},
	} {
		t.Run(label, func(t *testing.T) {
			host, uploads := loopbackRegistry(t)
			o := &OCI{Ref: "oci://" + host + "/eva/tenants:dev", Insecure: true}
			if _, err := o.Publish(ctx, renderUpdate(t, true, codes("HOST", 1)...), Safety{}); err != nil {
				t.Fatal(err)
			}
			ref, err := name.ParseReference(host+"/eva/tenants:dev", name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			planted := plantArtifact(t, o, ref, tc.planted)
			before := uploads.Load()
			// A partial update (as the operator publishes) of the tenant already there.
			res, err := (&OCI{Ref: o.Ref, Insecure: true}).Publish(ctx, renderUpdate(t, false, tenantSpec{code: "HOSTAA", replicas: 2}), Safety{})
			if err == nil {
				t.Fatalf("published over the planted entry: %+v", res)
			}
			t.Logf("refused: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.ContainsAny(err.Error(), "\n") {
				t.Errorf("the error holds a raw newline: %q", err)
			}
			if n := uploads.Load() - before; n != 0 {
				t.Errorf("the refused publish made %d upload requests", n)
			}
			if desc, err := remote.Head(ref); err != nil || desc.Digest != planted {
				t.Errorf("the tag moved: %v %v, want the planted %s", desc, err, planted)
			}
			if _, err := o.Pull(ctx); err == nil {
				t.Errorf("Pull (evactl diff --oci) accepted the planted entry")
			}
		})
	}
}
