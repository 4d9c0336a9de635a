package publish

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// revisionsSink is a sink that also reads its destination back.
type revisionsSink interface {
	Sink
	Revisions
}

// TestRevisionsAnswerFromTheDestination: two writers publish one tenant each; a third
// instance of the sink (an operator restarted, with an empty cache) tells what each
// revision holds of each tenant, from the destination alone. After a force-push back to
// the first revision, the head no longer holds the second writer's tenant.
func TestRevisionsAnswerFromTheDestination(t *testing.T) {
	t.Run("git", func(t *testing.T) {
		bare := bareRepo(t, t.TempDir(), "fleet.git")
		sink := func() revisionsSink {
			return &GitRemote{URL: bare, Branch: "main", CacheDir: filepath.Join(t.TempDir(), "cache")}
		}
		checkRevisions(t, sink,
			func(rev string) { gitCLI(t, bare, "update-ref", "refs/heads/main", rev) },
			func(rev string) string { return "main@sha1:" + rev })
	})
	t.Run("oci", func(t *testing.T) {
		host, _ := loopbackRegistry(t)
		ref := host + "/eva/tenants:dev"
		sink := func() revisionsSink { return &OCI{Ref: "oci://" + ref, Insecure: true} }
		checkRevisions(t, sink, func(rev string) {
			tag, err := name.ParseReference(ref, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			img, err := remote.Image(tag.Context().Digest(rev))
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(tag, img); err != nil {
				t.Fatal(err)
			}
		}, func(rev string) string { return "dev@" + rev })
	})
}

func checkRevisions(t *testing.T, sink func() revisionsSink, forcePush func(rev string), asFlux func(rev string) string) {
	ctx := context.Background()
	a, b := renderUpdate(t, false, codes("REVA", 1)...), renderUpdate(t, false, codes("REVB", 1)...)
	first, err := sink().Publish(ctx, a, Safety{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := sink().Publish(ctx, b, Safety{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"revaaa": TenantDigest(a.Tenants["revaaa"]), "revbaa": TenantDigest(b.Tenants["revbaa"])}
	restarted := sink()
	if head, err := restarted.Head(ctx); err != nil || head != second.Revision {
		t.Fatalf("Head = %q, %v; want the second publish %s", head, err, second.Revision)
	}
	unknown := strings.Repeat("0", len(strings.TrimPrefix(first.Revision, "sha256:")))
	if strings.HasPrefix(first.Revision, "sha256:") {
		unknown = "sha256:" + unknown
	}
	for _, tc := range []struct{ revision, dir, want string }{
		{second.Revision, "revaaa", want["revaaa"]}, // merged onto the first
		{asFlux(second.Revision), "revbaa", want["revbaa"]},
		{first.Revision, "revaaa", want["revaaa"]},
		{first.Revision, "revbaa", EmptyTenantDigest},
		{unknown, "revaaa", ""},
	} {
		if got, err := restarted.TenantDigest(ctx, tc.revision, tc.dir); err != nil || got != tc.want {
			t.Errorf("TenantDigest(%s, %s) = %q, %v; want %q", tc.revision, tc.dir, got, err, tc.want)
		}
	}
	forcePush(first.Revision)
	head, err := restarted.Head(ctx)
	if err != nil || head != first.Revision {
		t.Fatalf("after the force-push, Head = %q, %v; want %s", head, err, first.Revision)
	}
	if got, err := restarted.TenantDigest(ctx, head, "revbaa"); err != nil || got != EmptyTenantDigest {
		t.Errorf("after the force-push, the head holds revbaa as %q, %v; want it missing", got, err)
	}
}
