package publish

import (
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/render"
)

// TestCheckCountsMovedTenantsAsNotLost: removing a cell's last tenant looks like an
// empty input and is refused, unless it leaves because it moved to another cell's
// tree (Safety.Moved); a moved tenant's copy must still be Decommissioned to go.
func TestCheckCountsMovedTenantsAsNotLost(t *testing.T) {
	published := map[string][]byte{
		"tenants/abcdef/manifests.yaml": []byte("kind: Namespace\nmetadata:\n  labels:\n    " + render.LabelLifecycle + ": Decommissioned\n"),
		"flux/abcdef.yaml":              []byte("kind: Kustomization\n"),
	}
	empty := Update{Tenants: map[string][]render.File{}, Full: true}
	if _, err := Preview(published, empty, Safety{}); err == nil || !strings.Contains(err.Error(), "refusing to publish 0 tenant(s) over 1 published") {
		t.Fatalf("the last tenant removed: %v", err)
	}
	if _, err := Preview(published, empty, Safety{Moved: []string{"abcdef"}}); err != nil {
		t.Fatalf("the last tenant moved away: %v", err)
	}
	published["tenants/abcdef/manifests.yaml"] = []byte("kind: Namespace\n")
	if _, err := Preview(published, empty, Safety{Moved: []string{"abcdef"}}); err == nil || !strings.Contains(err.Error(), "not Decommissioned") {
		t.Fatalf("a moved tenant's copy that is not Decommissioned: %v", err)
	}
}
