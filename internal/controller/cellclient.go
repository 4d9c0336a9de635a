package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// A cell's operator (docs/cells.md) reads and writes two clusters: the fleet cluster,
// which holds the EvaTenants and EvaRollouts (and their status and events), and its
// own cell, where it delivers the tenants placed on it. CellClient and CellReader route
// each call by the kind of object it names, so the reconciler is the same in both
// shapes of the operator.

// onFleet says whether obj is a kind the fleet cluster holds.
func onFleet(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *evav1.EvaTenant, *evav1.EvaTenantList, *evav1.EvaRollout, *evav1.EvaRolloutList:
		return true
	case *metav1.PartialObjectMetadata:
		// A write answered with the metadata alone (the tenant's status patch).
		return o.GroupVersionKind().Group == evav1.GroupVersion.Group
	}
	return false
}

// CellClient is the client of a cell's operator: EvaTenants and EvaRollouts go to
// Fleet, everything else to the embedded cell client.
type CellClient struct {
	client.Client
	Fleet client.Client
}

func (c *CellClient) pick(obj runtime.Object) client.Client {
	if onFleet(obj) {
		return c.Fleet
	}
	return c.Client
}

// Get implements client.Reader.
func (c *CellClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.pick(obj).Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (c *CellClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.pick(list).List(ctx, list, opts...)
}

// Create implements client.Writer.
func (c *CellClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.pick(obj).Create(ctx, obj, opts...)
}

// Delete implements client.Writer.
func (c *CellClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.pick(obj).Delete(ctx, obj, opts...)
}

// Update implements client.Writer.
func (c *CellClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.pick(obj).Update(ctx, obj, opts...)
}

// Patch implements client.Writer.
func (c *CellClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.pick(obj).Patch(ctx, obj, patch, opts...)
}

// DeleteAllOf implements client.Writer.
func (c *CellClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.pick(obj).DeleteAllOf(ctx, obj, opts...)
}

// Status implements client.StatusClient.
func (c *CellClient) Status() client.SubResourceWriter { return c.SubResource("status") }

// SubResource implements client.SubResourceClientConstructor.
func (c *CellClient) SubResource(name string) client.SubResourceClient {
	return &cellSubResource{c: c, name: name}
}

// cellSubResource routes a subresource call as CellClient routes the object's.
type cellSubResource struct {
	c    *CellClient
	name string
}

func (s *cellSubResource) Get(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
	return s.c.pick(obj).SubResource(s.name).Get(ctx, obj, sub, opts...)
}

func (s *cellSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return s.c.pick(obj).SubResource(s.name).Create(ctx, obj, sub, opts...)
}

func (s *cellSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return s.c.pick(obj).SubResource(s.name).Update(ctx, obj, opts...)
}

func (s *cellSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return s.c.pick(obj).SubResource(s.name).Patch(ctx, obj, patch, opts...)
}

func (s *cellSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return s.c.Client.SubResource(s.name).Apply(ctx, obj, opts...)
}

// CellReader is the uncached reader of a cell's operator, routed as CellClient.
type CellReader struct {
	client.Reader
	Fleet client.Reader
}

// Get implements client.Reader.
func (r *CellReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if onFleet(obj) {
		return r.Fleet.Get(ctx, key, obj, opts...)
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (r *CellReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if onFleet(list) {
		return r.Fleet.List(ctx, list, opts...)
	}
	return r.Reader.List(ctx, list, opts...)
}
