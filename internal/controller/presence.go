package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// LabelPresence marks the Leases operators announce themselves with; its value is the
// operator version's hash (a version may hold characters a label value may not).
const LabelPresence = "eva.aidonow.com/operator-presence"

// Presence announces that this operator version runs and knows which versions do:
// every operator renews a Lease of its version (LabelPresence) in the claims namespace
// every Every, lasting three times that, and lists the others'. A tenant that belongs
// to a version no fresh Lease announces is unserved: nobody renders it, so no release
// may be given to it and its last status is not current (Unserved).
type Presence struct {
	// Client writes this version's Lease; Reader lists the others' (the API server).
	Client client.Client
	Reader client.Reader
	// Namespace holds the Leases: the claims namespace, shared by every version.
	Namespace string
	// Version is this operator's version (OPERATOR_VERSION, "" for none).
	Version string
	// Every is how often the Lease is renewed; it lasts three times that.
	Every time.Duration
	// OnChange is called after the first listing and whenever a version stopped
	// announcing itself: tenants may have become unserved.
	OnChange func(ctx context.Context)
	// Now returns the current time (tests fix it).
	Now func() time.Time

	mu      sync.RWMutex
	running map[string]bool // the versions announced
	listed  bool
}

// NeedLeaderElection: only the elected operator of a version serves its tenants, so
// only it announces the version.
func (p *Presence) NeedLeaderElection() bool { return true }

// Start renews the Lease and lists the others' until ctx ends.
func (p *Presence) Start(ctx context.Context) error {
	tick := time.NewTicker(p.Every)
	defer tick.Stop()
	for {
		if err := p.beat(ctx); err != nil {
			ctrllog.FromContext(ctx).Error(err, "announcing this operator version")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// beat renews this version's Lease, then reads which versions run.
func (p *Presence) beat(ctx context.Context) error {
	now := metav1.NewMicroTime(p.now())
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: p.Namespace, Name: PresenceLeaseName(p.Version)}
	err := p.Reader.Get(ctx, key, l)
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{LabelPresence: versionHash(p.Version)}}}
		p.fill(l, now)
		err = p.Client.Create(ctx, l)
	case err == nil:
		p.fill(l, now)
		err = p.Client.Update(ctx, l)
	}
	if err != nil {
		return fmt.Errorf("renewing Lease %s: %w", key, err)
	}
	var list coordinationv1.LeaseList
	if err := p.Reader.List(ctx, &list, client.InNamespace(p.Namespace), client.HasLabels{LabelPresence}); err != nil {
		return fmt.Errorf("listing operator presence Leases: %w", err)
	}
	running := map[string]bool{}
	for _, l := range list.Items {
		if fresh(l, p.now()) && l.Spec.HolderIdentity != nil {
			running[*l.Spec.HolderIdentity] = true
		}
	}
	p.mu.Lock()
	changed := !p.listed
	for v := range p.running {
		changed = changed || !running[v]
	}
	p.running, p.listed = running, true
	p.mu.Unlock()
	if changed && p.OnChange != nil {
		p.OnChange(ctx)
	}
	return nil
}

func (p *Presence) fill(l *coordinationv1.Lease, now metav1.MicroTime) {
	l.Spec.HolderIdentity = ptr.To(p.Version)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(3 * p.Every / time.Second))
	l.Spec.RenewTime = &now
}

// fresh: the Lease was renewed within its duration.
func fresh(l coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// Unserved says why no running operator serves the tenant ("" when one may, or before
// the first listing): the version its annotation claims it for, or its
// spec.operatorVersion asks for, announces no running operator. A tenant that names no
// version is any operator's.
func (p *Presence) Unserved(t *evav1.EvaTenant) string {
	if p == nil {
		return ""
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.listed {
		return ""
	}
	// The rule of EvaTenantReconciler.owns: the annotation names a version exactly,
	// spec.operatorVersion with or without its "v".
	version, from := t.Annotations[tenant.AnnotationOperatorVersion], "annotation "+tenant.AnnotationOperatorVersion
	served := p.running[version]
	if version == "" {
		version, from = t.Spec.OperatorVersion, "spec.operatorVersion"
		served = version == ""
		for v := range p.running {
			served = served || normalVersion(v) == normalVersion(version)
		}
	}
	if served {
		return ""
	}
	return fmt.Sprintf("no running operator serves operator version %q (its %s); none announces it in namespace %s",
		version, from, p.Namespace)
}

func (p *Presence) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// PresenceLeaseName is the Lease an operator version announces itself with.
func PresenceLeaseName(version string) string { return "eva-operator-presence-" + versionHash(version) }

func versionHash(version string) string {
	sum := sha256.Sum256([]byte(version))
	return hex.EncodeToString(sum[:])[:16]
}

// normalVersion is a version as spec.operatorVersion is compared ("v1.2" and "1.2"
// are one).
func normalVersion(v string) string { return strings.TrimPrefix(v, "v") }
