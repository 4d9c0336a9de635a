package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

const waitFor = 30 * time.Second

type tenantOpt func(*evav1.EvaTenant)

func newTenant(ns, code string, tier evav1.Tier, opts ...tenantOpt) *evav1.EvaTenant {
	t := &evav1.EvaTenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(code)},
		Spec:       evav1.EvaTenantSpec{CapsuleCode: code, Tier: tier, SeedsVersion: "seeds-1", Wave: 2},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// createTenant creates a tenant. A create the API server times out on is tried again,
// as a client would: under the full make test, with the end-to-end suite beside it on
// two cores, the API server once answered a create with "request did not complete
// within requested timeout" after 60s. The timed-out attempt may have been stored,
// so AlreadyExists on a later attempt is the tenant created, read back.
func createTenant(t testing.TB, tn *evav1.EvaTenant) {
	t.Helper()
	ctx := context.Background()
	want := tn.DeepCopy()
	for attempt := 1; ; attempt++ {
		err := k8s.Create(ctx, tn)
		switch {
		case err == nil:
			return
		case attempt > 1 && apierrors.IsAlreadyExists(err):
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(want), tn); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(tn.Spec, want.Spec) {
				t.Fatalf("%s exists with another spec than the one whose create timed out", tn.Name)
			}
			return
		case attempt < 3 && (apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)):
			t.Logf("create %s: %v; trying again", tn.Name, err)
			*tn = *want.DeepCopy()
		default:
			t.Fatal(err)
		}
	}
}

func getTenant(t testing.TB, tn *evav1.EvaTenant) *evav1.EvaTenant {
	t.Helper()
	var got evav1.EvaTenant
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: tn.Namespace, Name: tn.Name}, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func condition(tn *evav1.EvaTenant, ct string) metav1.Condition {
	if c := apimeta.FindStatusCondition(tn.Status.Conditions, ct); c != nil {
		return *c
	}
	return metav1.Condition{Type: ct, Status: metav1.ConditionUnknown}
}

// waitPhase waits for the tenant to reach a phase.
func waitPhase(t testing.TB, tn *evav1.EvaTenant, phase evav1.Phase) *evav1.EvaTenant {
	t.Helper()
	var got *evav1.EvaTenant
	eventually(t, waitFor, fmt.Sprintf("%s phase %s", tn.Spec.CapsuleCode, phase), func() error {
		got = getTenant(t, tn)
		if got.Status.Phase != phase {
			return fmt.Errorf("phase %q, Ready: %s", got.Status.Phase, condition(got, evav1.ConditionReady).Message)
		}
		return nil
	})
	return got
}

// eventReasons lists the reasons of the events recorded about a tenant, in order.
func eventReasons(t testing.TB, tn *evav1.EvaTenant) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == tn.Name && e.Regarding.Namespace == tn.Namespace {
			out = append(out, e.Reason)
		}
	}
	return out
}
