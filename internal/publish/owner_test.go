package publish

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aidonow/eva/internal/render"
)

// TestOneOwnerPerCode is issue 32.6 on the publishing path: a kubectl EvaTenant given a
// tenant file's code, published by the operator into the branch (or artifact) evactl
// publishes to, overwrote the file tenant's folder. Each tenant's Namespace now records
// its owner (the EvaTenant's UID, or tenant-file), and both shared sinks refuse to
// change a folder another owner published, naming no owner; the owner itself may, and
// a folder published before owners were recorded is taken.
func TestOneOwnerPerCode(t *testing.T) {
	ctx := context.Background()
	file := tenantSpec{code: "OWNAAA"}
	kubectl := tenantSpec{code: "OWNAAA", replicas: 2, uid: "0e1f5d3c-1111-4c6e-9b1a-7a1d0c2f3e4d"}
	other := tenantSpec{code: "OWNAAA", replicas: 3, uid: "5b2c7e9a-2222-4d8f-8c3b-1e2f3a4b5c6d"}
	sinks := map[string]func(t *testing.T) Sink{
		"git": func(t *testing.T) Sink {
			return remoteFor(bareRepo(t, t.TempDir(), "fleet.git"), filepath.Join(t.TempDir(), "cache"))
		},
		"oci": func(t *testing.T) Sink {
			host, _ := loopbackRegistry(t)
			return &OCI{Ref: "oci://" + host + "/eva/tenants:dev", Insecure: true}
		},
	}
	for name, sink := range sinks {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				first, then tenantSpec
				refused     string
			}{
				{file, kubectl, "a tenant file under tenants/ published it"},
				{kubectl, file, "an EvaTenant applied to the cluster published it"},
				{kubectl, other, "an EvaTenant applied to the cluster published it"},
				{kubectl, tenantSpec{code: "OWNAAA", replicas: 4, uid: kubectl.uid}, ""},
			} {
				s := sink(t)
				if _, err := s.Publish(ctx, renderUpdate(t, false, c.first), Safety{}); err != nil {
					t.Fatal(err)
				}
				_, err := s.Publish(ctx, renderUpdate(t, false, c.then), Safety{})
				switch {
				case c.refused == "" && err != nil:
					t.Errorf("the owner's own change (uid %q): %v", c.then.uid, err)
				case c.refused != "" && (!errors.Is(err, ErrOtherOwner) || !strings.Contains(err.Error(), c.refused)):
					t.Errorf("uid %q over uid %q: %v, want refused (%s)", c.then.uid, c.first.uid, err, c.refused)
				case c.refused != "" && c.first.uid != "" && strings.Contains(err.Error(), c.first.uid):
					t.Errorf("the refusal names the owner: %v", err)
				}
			}
		})
	}
}

// TestOwnerOfReadsTheNamespace: the owner is the rendered Namespace's annotation; a
// foundation without one (published before owners were recorded) has none.
func TestOwnerOfReadsTheNamespace(t *testing.T) {
	u := renderUpdate(t, false, tenantSpec{code: "OWNBBB", uid: "uid-b"}, tenantSpec{code: "OWNCCC"})
	for dir, want := range map[string]string{"ownbbb": "uid-b", "ownccc": "tenant-file"} {
		for _, f := range u.Tenants[dir] {
			if f.Path == "tenants/"+dir+"/"+render.ManifestsFile {
				if got := render.OwnerOf(f.Data); got != want {
					t.Errorf("%s: owner %q, want %q", dir, got, want)
				}
			}
		}
	}
	if got := render.OwnerOf([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: eva-tenant-oldold\n")); got != "" {
		t.Errorf("a legacy foundation: owner %q", got)
	}
}

// legacy is the update of specs with each foundation as an Eva before owners were
// recorded wrote it: no owner annotation on the Namespace.
func legacy(t *testing.T, specs ...tenantSpec) Update {
	t.Helper()
	u := renderUpdate(t, false, specs...)
	for d, files := range u.Tenants {
		for i, f := range files {
			if f.Path != "tenants/"+d+"/"+render.ManifestsFile {
				continue
			}
			var kept []string
			for _, line := range strings.Split(string(f.Data), "\n") {
				if !strings.Contains(line, "eva.aidonow.com/owner-uid") {
					kept = append(kept, line)
				}
			}
			files[i].Data = []byte(strings.Join(kept, "\n"))
			if render.OwnerOf(files[i].Data) != "" {
				t.Fatalf("%s: the legacy foundation still names an owner", d)
			}
		}
	}
	return u
}

// TestLegacyFolderIsTakenOnlyByItsOwner: a folder published before owners were recorded
// names none. A kubectl EvaTenant that has never published may not take it (it would
// take a legacy file tenant's folder, and the file tenant would then be refused its
// own); the tenant files' full publish (what evactl publishes, admitted by review) and an
// EvaTenant that published before (Adopt) may, and own it from then on.
func TestLegacyFolderIsTakenOnlyByItsOwner(t *testing.T) {
	ctx := context.Background()
	kubectl := tenantSpec{code: "OWNLGY", replicas: 2, uid: "0e1f5d3c-3333-4c6e-9b1a-7a1d0c2f3e4d"}
	file := tenantSpec{code: "OWNLGY", replicas: 3}
	s := remoteFor(bareRepo(t, t.TempDir(), "fleet.git"), filepath.Join(t.TempDir(), "cache"))
	if _, err := s.Publish(ctx, legacy(t, tenantSpec{code: "OWNLGY"}), Safety{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(ctx, renderUpdate(t, false, kubectl), Safety{}); !errors.Is(err, ErrOtherOwner) ||
		!strings.Contains(err.Error(), "published before owners were recorded") {
		t.Fatalf("a new EvaTenant over a legacy folder: %v, want refused", err)
	}
	adopted := renderUpdate(t, false, file)
	adopted.Adopt = map[string]bool{"ownlgy": true}
	if _, err := s.Publish(ctx, adopted, Safety{}); err != nil {
		t.Fatalf("the tenant files adopting their legacy folder: %v", err)
	}
	if _, err := s.Publish(ctx, renderUpdate(t, false, kubectl), Safety{}); !errors.Is(err, ErrOtherOwner) ||
		!strings.Contains(err.Error(), "a tenant file under tenants/ published it") {
		t.Fatalf("a new EvaTenant over the adopted folder: %v, want refused", err)
	}
}

// TestRefusedTenantHoldsBackNoOtherInItsBatch: the operator publishes tenants in batches;
// one tenant refused its folder (a kubectl EvaTenant given a file tenant's code) is
// answered with the refusal, and the others of the batch are published all the same.
func TestRefusedTenantHoldsBackNoOtherInItsBatch(t *testing.T) {
	ctx := context.Background()
	s := remoteFor(bareRepo(t, t.TempDir(), "fleet.git"), filepath.Join(t.TempDir(), "cache"))
	if _, err := s.Publish(ctx, renderUpdate(t, false, tenantSpec{code: "OWNFIL"}), Safety{}); err != nil {
		t.Fatal(err)
	}
	b := &Batcher{Sink: s, Window: 50 * time.Millisecond}
	type answer struct {
		revision string
		err      error
	}
	answers := map[string]chan answer{"ownfil": make(chan answer, 1), "ownnew": make(chan answer, 1)}
	submit := func(spec tenantSpec) {
		d := render.DirName(spec.code)
		b.Submit(d, renderUpdate(t, false, spec).Tenants[d], false, func(revision string, err error) { answers[d] <- answer{revision, err} })
	}
	submit(tenantSpec{code: "OWNFIL", uid: "0e1f5d3c-4444-4c6e-9b1a-7a1d0c2f3e4d"})
	submit(tenantSpec{code: "OWNNEW", uid: "0e1f5d3c-5555-4c6e-9b1a-7a1d0c2f3e4d"})
	refused, published := <-answers["ownfil"], <-answers["ownnew"]
	if !errors.Is(refused.err, ErrOtherOwner) || strings.Contains(refused.err.Error(), "OWNNEW") {
		t.Errorf("the impostor: %v, want refused naming only its own code", refused.err)
	}
	if published.err != nil || published.revision == "" {
		t.Fatalf("the other tenant of the batch: revision %q, %v; want it published", published.revision, published.err)
	}
}
