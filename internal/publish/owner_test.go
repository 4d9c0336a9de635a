package publish

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

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
