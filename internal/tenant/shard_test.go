package tenant

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
)

// TestValidateShardLabel: the shard label of a tenant (set by the platform on the
// EvaTenant) is copied onto every rendered object, so a value that is not a label value
// fails validation, naming the label; none or a valid one passes.
func TestValidateShardLabel(t *testing.T) {
	c := DefaultCatalog()
	for value, want := range map[string]string{"-": "", "a": "", "shard-7": "", "": "an empty shard name"} {
		tn := &evav1.EvaTenant{
			TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: "acmeco", Namespace: "eva-system"},
			Spec:       evav1.EvaTenantSpec{CapsuleCode: "ACMECO", Tier: evav1.TierStarter, SeedsVersion: "seeds-1"},
		}
		if value != "-" {
			tn.Labels = map[string]string{shard.Label: value}
		}
		errs := c.Validate(tn)
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("shard %q: %v", value, errs)
		case want != "" && (len(errs) != 1 || errs[0].Field != "metadata.labels[eva.aidonow.com/shard]" || !strings.Contains(errs[0].Detail, want)):
			t.Errorf("shard %q: %v, want one problem on the shard label saying %q", value, errs, want)
		}
	}
}
