/*
Copyright The NDSL controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Object is a typed API object, such as *appsv1.Deployment.
type Object interface {
	metav1.Object
	runtime.Object
}

// ApplyConfiguration is the apply configuration of a kind, such as
// *appsv1ac.DeploymentApplyConfiguration; AC is the type itself.
type ApplyConfiguration[AC any] interface {
	GetName() *string
	GetNamespace() *string
	WithUID(uid types.UID) AC
}

// ChildClient is the part of a typed client (client-go's gentype clients:
// Deployments(namespace), PersistentVolumes()...) that writes children.
type ChildClient[T Object, AC any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Applier[T, AC]
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	// Get and Watch serve only a blocker: a same-name object the selected
	// cache does not hold.
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Children reads one kind of child from the informer's cache and writes it
// with server-side apply under FieldManager. One value serves a controller
// for every child of that kind.
type Children[T Object, AC ApplyConfiguration[AC]] struct {
	// Kind names the kind in events and errors.
	Kind     string
	Resource schema.GroupResource
	lister   listers.ResourceIndexer[T]
	informer cache.SharedIndexInformer
	// controllerIndex names the index by controller IndexByController
	// added, empty until then.
	controllerIndex string
	client          func(namespace string) ChildClient[T, AC]
	// verdicts spare a resync the comparison of an unchanged child.
	verdicts *upToDateVerdicts
	// blockers, when set, watches same-name objects that block a create.
	blockers *BlockerWatches
}

// WatchBlockers makes the adapter watch every object that blocks a child's
// create with b, which requeues the owner when the blocker goes. Call it
// before Base.Track, which stops b with the controller.
func (c *Children[T, AC]) WatchBlockers(b *BlockerWatches) { c.blockers = b }

// NewChildren returns the adapter for one kind of child: informer is its
// shared informer, client returns its typed client in a namespace (cluster-
// scoped kinds ignore the namespace).
func NewChildren[T Object, AC ApplyConfiguration[AC]](kind string, resource schema.GroupResource,
	informer cache.SharedIndexInformer, client func(namespace string) ChildClient[T, AC]) *Children[T, AC] {
	return &Children[T, AC]{
		Kind:     kind,
		Resource: resource,
		lister:   listers.New[T](informer.GetIndexer(), resource),
		informer: informer,
		client:   client,
	}
}

// track implements Tracked: the verdicts, which need a handler that forgets
// the children that go, live as long as the controller (Base.Track);
// untracked, every child is compared in full. So do the blocker watches.
func (c *Children[T, AC]) track(b *Base) error {
	verdicts := &upToDateVerdicts{bySpec: specGenerations[c.Resource]}
	if err := b.handleWithoutResync(c.informer, verdicts.forgetDeleted()); err != nil {
		return fmt.Errorf("tracking the %ss: %w", c.Kind, err)
	}
	c.verdicts = verdicts
	if c.blockers != nil {
		b.onStop(c.blockers.Stop)
	}
	return nil
}

// Get reads a child from the cache; found is false when it is not there.
func (c *Children[T, AC]) Get(namespace, name string) (obj T, found bool, err error) {
	obj, err = listers.NewNamespaced(c.lister, namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return obj, false, nil
	case err != nil:
		return obj, false, fmt.Errorf("reading %s %s from the cache: %w", c.Kind, objectName(namespace, name), err)
	}
	return obj, true, nil
}

// IndexByController adds the index of the children by their controller of
// ownerKind (ControllerIndex) to the shared informer, unless another
// controller did, for ListControlledBy. Call it while building the
// controller: an informer that already started is indexed whole, at once.
func (c *Children[T, AC]) IndexByController(ownerKind schema.GroupKind) error {
	name, index := ControllerIndex(ownerKind)
	if err := AddIndexers(c.informer, cache.Indexers{name: index}); err != nil {
		return fmt.Errorf("indexing %ss by their %s: %w", c.Kind, ownerKind.Kind, err)
	}
	c.controllerIndex = name
	return nil
}

// ListControlledBy lists the cached children, of every namespace, that
// owner controls, from the index IndexByController added for owner's kind:
// the cost is that of owner's children, not of the cache.
func (c *Children[T, AC]) ListControlledBy(owner metav1.Object) ([]T, error) {
	if c.controllerIndex == "" {
		return nil, fmt.Errorf("listing the %ss of %s: the %s cache is not indexed by controller", c.Kind, owner.GetName(), c.Kind)
	}
	objs, err := c.informer.GetIndexer().ByIndex(c.controllerIndex, string(owner.GetUID()))
	if err != nil {
		return nil, fmt.Errorf("listing the %ss of %s from the cache: %w", c.Kind, owner.GetName(), err)
	}
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		// A transform may store what is not a T: not a child.
		if child, ok := obj.(T); ok {
			out = append(out, child)
		}
	}
	return out, nil
}

// Write says what Apply did.
type Write int

const (
	// Unchanged: the child was as desired; nothing was sent.
	Unchanged Write = iota
	// Created the child.
	Created
	// Updated the child.
	Updated
)

// Verb is the write as errors and events name it.
func (w Write) Verb() string {
	switch w {
	case Created:
		return "create"
	case Updated:
		return "update"
	}
	return "read"
}

// Apply makes the child desired describes match it, for owner, and returns
// it as it now is and which write it made (or tried to, with an error).
// live is the cached child (nil when there is none); one that owner does
// not control is never written: that is a NotOwnedError. Nothing is sent
// when live is exactly as desired (upToDate).
func (c *Children[T, AC]) Apply(ctx context.Context, owner metav1.Object, desired AC, live T) (T, Write, error) {
	var none T
	exists := !isNil(live)
	switch {
	case exists && !metav1.IsControlledBy(live, owner):
		return none, Unchanged, NewNotOwnedError(c.Kind, live)
	case exists && live.GetDeletionTimestamp() != nil:
		// Someone deleted it; its delete event brings the owner back to
		// create a new one.
		return live, Unchanged, nil
	}
	desiredJSON, err := json.Marshal(desired)
	if err != nil {
		return none, Unchanged, fmt.Errorf("encoding the desired %s: %w", c.Kind, err)
	}
	sum := desiredSum(desiredJSON)
	if exists && c.verdicts != nil && c.verdicts.upToDate(live, sum) {
		return live, Unchanged, nil
	}
	var want map[string]any
	if err := json.Unmarshal(desiredJSON, &want); err != nil {
		return none, Unchanged, fmt.Errorf("decoding the desired %s: %w", c.Kind, err)
	}
	if !exists {
		return c.create(ctx, owner, desired, want, desiredJSON, sum)
	}
	return c.update(ctx, desired, want, &sum, live)
}

// update applies desired to live, a child owner controls, when they differ.
// sum identifies desired for the verdict memo; nil when live is not the
// cached child (a live read), whose verdict is not remembered.
func (c *Children[T, AC]) update(ctx context.Context, desired AC, want map[string]any, sum *digest, live T) (T, Write, error) {
	var none T
	same, err := upToDate(want, live)
	if err != nil {
		return none, Unchanged, fmt.Errorf("comparing the cached %s %s with the desired one: %w", c.Kind, klog.KObj(live), err)
	}
	if same {
		if c.verdicts != nil && sum != nil {
			c.verdicts.remember(live, *sum)
		}
		return live, Unchanged, nil
	}

	client := c.client(live.GetNamespace())
	if live, err = c.upgradeCreated(ctx, client, live); err != nil {
		return none, Updated, err
	}
	if err := c.handOver(ctx, client, want, live); err != nil {
		return none, Updated, err
	}
	// The UID makes the apply an update of the cached child only: the API
	// server refuses it (uid mismatch, or uid immutable) when the child has
	// been deleted or replaced by another object since.
	written, err := client.Apply(ctx, desired.WithUID(live.GetUID()), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if isUIDRefused(err) {
		// The cache is behind; the retry sees the object that is there now.
		return none, Updated, apierrors.NewConflict(c.Resource, live.GetName(), err)
	}
	if err != nil {
		return none, Updated, err
	}
	klog.FromContext(ctx).V(2).Info("Updated child", "kind", c.Kind, "child", klog.KObj(written))
	return written, Updated, nil
}

// upgradeCreated moves the Create's "Update" entry of a child only created
// so far to this manager's "Apply" entry (client-go's csaupgrade, as kubectl
// does), so that the apply that follows removes the fields it no longer sets.
// The cache keeps only this manager's entries, and not the Create's fields
// (TrimManagedFields), while the patch rewrites the whole list: it is
// computed from the child read live, once in the child's life, and holds
// only for the resourceVersion read. It returns the child as it now is.
func (c *Children[T, AC]) upgradeCreated(ctx context.Context, client ChildClient[T, AC], cached T) (T, error) {
	var none T
	if own, err := ownershipOf(cached); err != nil || !own.created {
		return cached, err
	}
	live, err := client.Get(ctx, cached.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && live.GetUID() != cached.GetUID()) {
		// Gone or replaced since the cache saw it: the retry sees what is there.
		return none, apierrors.NewConflict(c.Resource, cached.GetName(), fmt.Errorf("%s %s changed since it was cached", c.Kind, klog.KObj(cached)))
	}
	if err != nil {
		return none, err
	}
	upgrade, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil {
		return none, fmt.Errorf("moving the fields of %s %s to this manager's apply: %w", c.Kind, klog.KObj(live), err)
	}
	if upgrade == nil {
		return live, nil
	}
	return client.Patch(ctx, live.GetName(), types.JSONPatchType, upgrade, metav1.PatchOptions{FieldManager: FieldManager})
}

// create creates the child the cache does not hold, from desired fields
// (desiredJSON is their encoding, sum its digest). A Create, unlike an apply, never takes
// over an object of the same name. On AlreadyExists the name's holder is
// read live (the cache holds only objects with ManagedByLabel): see blocked.
func (c *Children[T, AC]) create(ctx context.Context, owner metav1.Object, desiredAC AC, desired map[string]any, desiredJSON []byte, sum digest) (T, Write, error) {
	var none T
	obj := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
	if err := json.Unmarshal(desiredJSON, obj); err != nil {
		return none, Created, fmt.Errorf("decoding the desired %s: %w", c.Kind, err)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[CreatedAnnotation] = createdHash(desired)
	obj.SetAnnotations(annotations)
	created, err := c.client(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return c.blocked(ctx, owner, desiredAC, desired, obj.GetNamespace(), obj.GetName(), err)
	}
	if err != nil {
		return none, Created, err
	}
	if c.verdicts != nil {
		c.verdicts.rememberCreated(created, sum)
	}
	klog.FromContext(ctx).V(2).Info("Created child", "kind", c.Kind, "child", klog.KObj(created))
	return created, Created, nil
}

// blocked handles a create refused because name is taken (exists, the
// AlreadyExists error), with one live GET. A holder owner controls is its
// child without ManagedByLabel (edited away, or written by an older
// version): the update path puts the label back. Any other holder is a
// blocker: a NotOwnedError, and a watch on it that requeues owner once it
// goes. A holder gone since is transient: the retry creates the child.
func (c *Children[T, AC]) blocked(ctx context.Context, owner metav1.Object, desiredAC AC, desired map[string]any,
	namespace, name string, exists error) (T, Write, error) {
	var none T
	client := c.client(namespace)
	holder, err := client.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return none, Created, exists
	case err != nil:
		return none, Created, fmt.Errorf("reading %s %s, which exists but is not in the cache: %w", c.Kind, objectName(namespace, name), err)
	case metav1.IsControlledBy(holder, owner):
		if holder.GetDeletionTimestamp() != nil {
			return holder, Unchanged, nil
		}
		return c.update(ctx, desiredAC, desired, nil, holder)
	}
	if c.blockers != nil {
		c.blockers.blocked(ctx, c.Resource, holder, Key{Namespace: owner.GetNamespace(), Name: owner.GetName()}, client.Watch)
	}
	return none, Created, NewNotOwnedError(c.Kind, holder)
}

// Delete deletes a child owner controls, unless it is already going. The
// UID precondition keeps a same-name object created since the cache saw
// the child safe. It reports whether it deleted anything.
func (c *Children[T, AC]) Delete(ctx context.Context, owner metav1.Object, obj T) (bool, error) {
	if !metav1.IsControlledBy(obj, owner) || obj.GetDeletionTimestamp() != nil {
		return false, nil
	}
	err := c.client(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(obj.GetUID())},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	klog.FromContext(ctx).V(2).Info("Deleted child", "kind", c.Kind, "child", klog.KObj(obj))
	return true, nil
}

// isUIDRefused reports whether err is the API server refusing a write
// because the object's UID is not the one given.
func isUIDRefused(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// isNil reports whether obj, a pointer type, is nil.
func isNil[T Object](obj T) bool {
	var none T
	return any(obj) == any(none)
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
