package controller

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

// writerOfTenantObjects is one identity that writes a tenant's Streams and Ingress: the
// operator in pure-cluster mode, or a tenant's applier under Flux or Argo CD.
type writerOfTenantObjects struct {
	name string
	// client acts as the identity for the tenant of code (its delivery file applied).
	client func(t *testing.T, code string) client.Client
}

var writersOfTenantObjects = []writerOfTenantObjects{
	{"operator", func(t *testing.T, _ string) client.Client { return asOperator(t) }},
	{"flux applier", func(t *testing.T, code string) client.Client {
		applyDeliveryFileFor(t, applierIdentities[0], code)
		return impersonating(t, applierIdentities[0].namespace, render.ApplierName(code))
	}},
	{"argocd applier", func(t *testing.T, code string) client.Client {
		applyArgoCDPlatform(t)
		applyDeliveryFileFor(t, applierIdentities[1], code)
		return impersonating(t, applierIdentities[1].namespace, render.ApplierName(code))
	}},
}

// TestTenantObjectShapesHoldEveryWriter: the Streams and the Ingress Eva renders for a
// tenant (every tier, dev environment) are admitted for each identity that writes them,
// and the shapes that would reach another tenant's stream, subjects or host, another
// server or the ingress controller's configuration are refused, for each identity alike
// (admission policies eva-tenant-streams and eva-tenant-ingresses); so is every object
// the appliers' attacks try (objectsEvaNeverRenders: releases elsewhere, Jobs on a node,
// chart sources with credentials, …), the operator included.
func TestTenantObjectShapesHoldEveryWriter(t *testing.T) {
	applyOperatorBase(t)
	for i, w := range writersOfTenantObjects {
		code := []string{"SHAPEA", "SHAPEB", "SHAPEC"}[i]
		t.Run(w.name, func(t *testing.T) {
			ctx := context.Background()
			ns := render.ApplierName(code)
			if err := k8s.Create(ctx, restrictedNamespace(ns)); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			c := w.client(t, code)
			rendered := renderedStreamsAndIngresses(t, code)
			if len(rendered) < 3 {
				t.Fatalf("rendered %d Streams and Ingresses, want at least 3", len(rendered))
			}
			for _, u := range rendered {
				eventually(t, 10*time.Second, "the rendered "+u.GetKind()+" "+u.GetName()+" to be admitted", func() error {
					return c.Create(ctx, u.DeepCopy(), client.DryRunAll)
				})
			}
			hostile := hostileStreamsAndIngresses(ns, code, devFenceDigest())
			maps.Copy(hostile, hostileNACKAccounts(ns, code))
			for what, obj := range hostile {
				err := untilFenced(10*time.Second, func() error { return c.Create(ctx, obj.DeepCopy(), client.DryRunAll) })
				if !fenced(err) {
					t.Errorf("%s: want an admission policy to refuse, got %v", what, err)
				}
			}
			assertIngressUpdatesKeepTheShape(t, c, rendered)
			for what, obj := range objectsEvaNeverRenders(ns, strings.ToLower(code)) {
				err := untilRefused(10*time.Second, func() error {
					return c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
				})
				if !apierrors.IsForbidden(err) { // by a policy, or by RBAC for a right this writer lacks
					t.Errorf("%s: want the API server to refuse, got %v", what, err)
				}
			}
		})
	}
}

// renderedStreamsAndIngresses are the Streams, NACK Accounts and Ingresses of the dev
// environment's bundle of a tenant of code, for every tier, with and without
// natsAccounts (its Streams then name its NACK Account).
func renderedStreamsAndIngresses(t *testing.T, code string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, accounts := range []bool{false, true} {
		r := testRenderer(t)
		r.Env.Settings.NATSAccounts = accounts
		for _, tier := range []evav1.Tier{evav1.TierStarter, evav1.TierCustomer, evav1.TierEnterprise, evav1.TierPlatform} {
			tn := fenceTenant(code)
			tn.Spec.Tier = tier
			b, err := r.Bundle(tn)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range b.Unstructured() {
				if u.GetKind() == "Stream" || u.GetKind() == "Ingress" || u.GetKind() == "Account" {
					out = append(out, u)
				}
			}
		}
	}
	if !slices.ContainsFunc(out, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Account" }) {
		t.Fatal("natsAccounts rendered no NACK Account")
	}
	return out
}

// hostileNACKAccounts are NACK Accounts in the namespace ns of the tenant of code that
// would make the tenant's Streams with other credentials or on other servers than its
// own.
func hostileNACKAccounts(ns, code string) map[string]*unstructured.Unstructured {
	account := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "jetstream.nats.io/v1beta2", "kind": "Account",
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
	}
	own := func() map[string]any {
		return map[string]any{"secret": map[string]any{"name": tenant.NATSCredsSecret(code)}, "file": tenant.NATSCredsKey}
	}
	with := func(k string, v any) map[string]any { return map[string]any{"creds": own(), k: v} }
	credsOf := func(secret, file string) map[string]any {
		c := map[string]any{"file": file}
		if secret != "" {
			c["secret"] = map[string]any{"name": secret}
		}
		return map[string]any{"creds": c}
	}
	return map[string]*unstructured.Unstructured{
		"a NACK Account of another name":            account("shared", map[string]any{"creds": own()}),
		"a NACK Account on other servers":           account(tenant.NATSAccountObject, with("servers", []any{"nats://attacker.example:4222"})),
		"a NACK Account with NACK's own creds file": account(tenant.NATSAccountObject, credsOf("", "/etc/nack/creds/nack.creds")),
		"a NACK Account with another Secret":        account(tenant.NATSAccountObject, credsOf("crm-database", tenant.NATSCredsKey)),
		"a NACK Account with another key":           account(tenant.NATSAccountObject, credsOf(tenant.NATSCredsSecret(code), "other.creds")),
		"a NACK Account with a token":               account(tenant.NATSAccountObject, with("token", map[string]any{"token": "t", "secret": map[string]any{"name": "x"}})),
		"a NACK Account with a user":                account(tenant.NATSAccountObject, with("user", map[string]any{"user": "u", "password": "p", "secret": map[string]any{"name": "x"}})),
		"a NACK Account with an nkey":               account(tenant.NATSAccountObject, with("nkey", map[string]any{"seed": "s", "secret": map[string]any{"name": "x"}})),
		"a NACK Account with a TLS identity":        account(tenant.NATSAccountObject, with("tls", map[string]any{"ca": "/etc/nack/ca.pem"})),
		"a NACK Account without credentials":        account(tenant.NATSAccountObject, map[string]any{}),
	}
}

// hostileStreamsAndIngresses are Streams and Ingresses in the namespace ns of the tenant
// of code that reach past it. The Ingresses carry the fence digest of the environment
// the cluster enforces, unless the case is about it: each is refused by its own rule.
func hostileStreamsAndIngresses(ns, code, fence string) map[string]*unstructured.Unstructured {
	lower := strings.ToLower(code)
	stream := func(name string, subjects []any, extra map[string]any) *unstructured.Unstructured {
		spec := map[string]any{"name": name, "subjects": subjects}
		maps.Copy(spec, extra)
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "jetstream.nats.io/v1beta2", "kind": "Stream",
			"metadata": map[string]any{"namespace": ns, "name": "hostile"}, "spec": spec}}
	}
	own := []any{"capsule." + code + ".events.>"}
	ingress := func(host, class string, annotations map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"namespace": ns, "name": "hostile"}
		withFence := map[string]any{tenant.AnnotationFence: fence}
		maps.Copy(withFence, annotations)
		meta["annotations"] = withFence
		if withFence[tenant.AnnotationFence] == nil {
			delete(withFence, tenant.AnnotationFence)
		}
		spec := map[string]any{"rules": []any{map[string]any{"host": host}}}
		if class != "" {
			spec["ingressClassName"] = class
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
			"metadata": meta, "spec": spec}}
	}
	host := lower + ".dev.eva.example.com"
	return map[string]*unstructured.Unstructured{
		"a Stream named as another tenant's":                 stream("eva-GLOBEX-events", own, nil),
		"a Stream capturing another tenant's subjects":       stream("eva-"+code+"-x", []any{"capsule.GLOBEX.events.>"}, nil),
		"a Stream capturing every subject":                   stream("eva-"+code+"-x", []any{">"}, nil),
		"a Stream without subjects":                          stream("eva-"+code+"-x", []any{}, nil),
		"a Stream mirroring another tenant's":                stream("eva-"+code+"-x", own, map[string]any{"mirror": map[string]any{"name": "eva-GLOBEX-events"}}),
		"a Stream sourcing another tenant's":                 stream("eva-"+code+"-x", own, map[string]any{"sources": []any{map[string]any{"name": "eva-GLOBEX-events"}}}),
		"a Stream on other servers":                          stream("eva-"+code+"-x", own, map[string]any{"servers": []any{"nats://attacker.example:4222"}}),
		"a Stream with another account's credentials":        stream("eva-"+code+"-x", own, map[string]any{"creds": "/etc/nats/sys.creds", "account": "SYS"}),
		"a Stream with another account's nkey":               stream("eva-"+code+"-x", own, map[string]any{"nkey": "/etc/nats/sys.nk"}),
		"a Stream with a credentials file alone":             stream("eva-"+code+"-x", own, map[string]any{"creds": "/etc/nats/sys.creds"}),
		"a Stream starting at a sequence of its own":         stream("eva-"+code+"-x", own, map[string]any{"firstSequence": int64(5)}),
		"a compressed Stream":                                stream("eva-"+code+"-x", own, map[string]any{"compression": "s2"}),
		"a Stream in another JetStream domain":               stream("eva-"+code+"-x", own, map[string]any{"jsDomain": "hub"}),
		"a Stream republishing to another tenant":            stream("eva-"+code+"-x", own, map[string]any{"republish": map[string]any{"source": ">", "destination": "capsule.GLOBEX.commands.x"}}),
		"a Stream transforming into another tenant's":        stream("eva-"+code+"-x", own, map[string]any{"subjectTransform": map[string]any{"source": ">", "dest": "capsule.GLOBEX.events.x"}}),
		"a Stream that refuses its deletion":                 stream("eva-"+code+"-x", own, map[string]any{"denyDelete": true}),
		"a Stream the operator may not delete":               stream("eva-"+code+"-x", own, map[string]any{"preventDelete": true}),
		"a sealed Stream":                                    stream("eva-"+code+"-x", own, map[string]any{"sealed": true}),
		"a Stream with any message size":                     stream("eva-"+code+"-x", own, map[string]any{"maxMsgSize": int64(1) << 30}),
		"a Stream with a consumer limit of its own":          stream("eva-"+code+"-x", own, map[string]any{"maxConsumers": int64(100000)}),
		"a Stream naming another NACK Account":               stream("eva-"+code+"-x", own, map[string]any{"account": "shared"}),
		"an Ingress aliasing another tenant's host":          ingress(host, "nginx", map[string]any{"nginx.ingress.kubernetes.io/server-alias": "globex.dev.eva.example.com"}),
		"an Ingress authenticating elsewhere":                ingress(host, "nginx", map[string]any{"nginx.ingress.kubernetes.io/auth-url": "http://attacker.example"}),
		"an Ingress with a configuration snippet":            ingress(host, "nginx", map[string]any{"nginx.ingress.kubernetes.io/configuration-snippet": "return 200;"}),
		"an Ingress under another tenant's host":             ingress(lower+".globex.dev.eva.example.com", "nginx", nil),
		"an Ingress for another tenant's host":               ingress("globex.dev.eva.example.com", "nginx", nil),
		"an Ingress on another domain":                       ingress(lower+".attacker.example", "nginx", nil),
		"an Ingress through another class":                   ingress(host, "internal", nil),
		"an Ingress choosing its class by annotation":        ingress(host, "", map[string]any{"kubernetes.io/ingress.class": "internal"}),
		"an Ingress with the environment's annotation and X": ingress(host, "nginx", map[string]any{"nginx.ingress.kubernetes.io/ssl-redirect": "false", "nginx.ingress.kubernetes.io/upstream-vhost": "globex"}),
		"an Ingress rendered for another environment":        ingress(host, "nginx", map[string]any{tenant.AnnotationFence: "sha256:" + strings.Repeat("0", 64)}),
		"an Ingress rendered for no environment":             ingress(host, "nginx", map[string]any{tenant.AnnotationFence: nil}),
	}
}

// assertIngressUpdatesKeepTheShape: on an Ingress an administrator annotated by hand, the
// writer c may update what it renders, the administrator's annotation left as it is,
// but may add no annotation of its own.
func assertIngressUpdatesKeepTheShape(t *testing.T, c client.Client, rendered []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	var ingress *unstructured.Unstructured
	for _, u := range rendered {
		if u.GetKind() == "Ingress" {
			ingress = u.DeepCopy()
		}
	}
	annotations := ingress.GetAnnotations()
	annotations["team.example.com/on-call"] = "sre"
	ingress.SetAnnotations(annotations)
	if err := k8s.Create(ctx, ingress); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ingress), ingress); err != nil {
		t.Fatal(err)
	}
	ingress.SetLabels(map[string]string{"eva.aidonow.com/capsule": "updated"})
	if err := c.Update(ctx, ingress.DeepCopy(), client.DryRunAll); err != nil {
		t.Errorf("updating an Ingress that carries an administrator's annotation: %v", err)
	}
	annotations["nginx.ingress.kubernetes.io/server-alias"] = "globex.dev.eva.example.com"
	ingress.SetAnnotations(annotations)
	if err := c.Update(ctx, ingress.DeepCopy(), client.DryRunAll); !fenced(err) {
		t.Errorf("adding a server alias by an update: want an admission policy to refuse, got %v", err)
	}
}

// untilRefused is untilFenced for a refusal by RBAC or by an admission policy.
func untilRefused(timeout time.Duration, do func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := do()
		if apierrors.IsForbidden(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
