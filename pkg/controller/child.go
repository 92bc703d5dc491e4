package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
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
	WithAnnotations(entries map[string]string) AC
	WithUID(uid types.UID) AC
}

// ChildClient is the part of a typed client (client-go's gentype clients:
// Deployments(namespace), PersistentVolumes()...) that writes children.
type ChildClient[T Object, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Apply(ctx context.Context, obj AC, opts metav1.ApplyOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Children reads one kind of child from the informer's cache and writes it
// with server-side apply under FieldManager. One value serves a controller
// for every child of that kind.
type Children[T Object, AC ApplyConfiguration[AC]] struct {
	// Kind names the kind in events and errors.
	Kind     string
	Resource schema.GroupResource
	lister   listers.ResourceIndexer[T]
	client   func(namespace string) ChildClient[T, AC]
}

// NewChildren returns the adapter for one kind of child: informer is its
// shared informer, client returns its typed client in a namespace (cluster-
// scoped kinds ignore the namespace).
func NewChildren[T Object, AC ApplyConfiguration[AC]](kind string, resource schema.GroupResource,
	informer cache.SharedIndexInformer, client func(namespace string) ChildClient[T, AC]) *Children[T, AC] {
	return &Children[T, AC]{
		Kind:     kind,
		Resource: resource,
		lister:   listers.New[T](informer.GetIndexer(), resource),
		client:   client,
	}
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

// List lists the cached children, of every namespace, that selector matches.
func (c *Children[T, AC]) List(selector labels.Selector) ([]T, error) {
	objs, err := c.lister.List(selector)
	if err != nil {
		return nil, fmt.Errorf("listing %ss from the cache: %w", c.Kind, err)
	}
	return objs, nil
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
// not control is never written: that is a NotOwnedError.
// Nothing is sent when live already carries every desired field and was
// last applied with the same fields (AppliedAnnotation).
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
	case !exists:
		// An apply creates or updates whatever is there: an object the
		// cache has not seen yet (created just before its would-be owner;
		// informers of different kinds are not ordered) would be taken
		// over. Read it from the API server first; what is left is the
		// round trip between this read and the apply.
		found, err := c.client(ptr.Deref(desired.GetNamespace(), "")).Get(ctx, ptr.Deref(desired.GetName(), ""), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return none, Unchanged, fmt.Errorf("reading %s %s before creating it: %w", c.Kind,
				objectName(ptr.Deref(desired.GetNamespace(), ""), ptr.Deref(desired.GetName(), "")), err)
		default:
			return c.Apply(ctx, owner, desired, found)
		}
	}

	want, err := fields(desired)
	if err != nil {
		return none, Unchanged, fmt.Errorf("encoding the desired %s: %w", c.Kind, err)
	}
	hash := appliedHash(want)
	desired = desired.WithAnnotations(map[string]string{AppliedAnnotation: hash})
	if exists {
		have, err := fields(live)
		if err != nil {
			return none, Unchanged, fmt.Errorf("encoding the cached %s: %w", c.Kind, err)
		}
		if live.GetAnnotations()[AppliedAnnotation] == hash && !diff(want, have).any {
			return live, Unchanged, nil
		}
	}

	write := Created
	if exists {
		write = Updated
		// The UID makes the apply an update of the cached child only: the
		// API server refuses it (uid mismatch, or uid immutable) when the
		// child has been deleted or replaced by another object since.
		desired = desired.WithUID(live.GetUID())
	}
	client := c.client(ptr.Deref(desired.GetNamespace(), ""))
	written, err := client.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if isUIDRefused(err) {
		// The cache is behind; the retry sees the object that is there now.
		return none, write, apierrors.NewConflict(c.Resource, live.GetName(), err)
	}
	if err != nil && exists && apierrors.IsInvalid(err) {
		// Entries another field manager holds in a list the child's
		// desired fields define (a port re-keyed by hand) survive an
		// apply, and may make its result invalid: replace those lists,
		// then apply what else differs.
		if fixed, replaceErr := c.replaceLists(ctx, client, want, hash, live); replaceErr != nil {
			err = replaceErr
		} else if !isNil(fixed) {
			written, err = fixed, nil
			if have, encErr := fields(fixed); encErr != nil || diff(want, have).any {
				written, err = client.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			}
		}
	}
	if err != nil {
		return none, write, err
	}
	if exists {
		// The same entries may also survive an apply that succeeds.
		if fixed, err := c.replaceLists(ctx, client, want, hash, written); err != nil {
			return none, Updated, err
		} else if !isNil(fixed) {
			written = fixed
		}
		klog.FromContext(ctx).V(2).Info("Updated child", "kind", c.Kind, "child", klog.KObj(written))
		return written, Updated, nil
	}
	klog.FromContext(ctx).V(2).Info("Created child", "kind", c.Kind, "child", klog.KObj(written))
	return written, Created, nil
}

// replaceLists replaces the lists of obj that differ from the desired fields
// with a JSON patch, valid only for obj's resourceVersion, which also sets
// AppliedAnnotation to hash; it returns the zero T, and sends nothing, when
// no list differs.
func (c *Children[T, AC]) replaceLists(ctx context.Context, client ChildClient[T, AC], want map[string]any, hash string, obj T) (T, error) {
	var none T
	have, err := fields(obj)
	if err != nil {
		return none, err
	}
	d := diff(want, have)
	if len(d.lists) == 0 {
		return none, nil
	}
	annotate := patchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AppliedAnnotation: hash}}
	if obj.GetAnnotations() != nil {
		annotate = patchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(AppliedAnnotation), Value: hash}
	}
	patch, err := d.replacePatch(obj.GetResourceVersion(), annotate)
	if err != nil {
		return none, err
	}
	klog.FromContext(ctx).V(2).Info("Replacing lists another field manager holds entries of", "kind", c.Kind, "child", klog.KObj(obj))
	written, err := client.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if isPatchNotApplicable(err) {
		// The patch was built from obj at its resourceVersion: the object
		// changed since the cache saw it. A conflict, retried with what the
		// cache holds then, not a failure to report.
		return none, apierrors.NewConflict(c.Resource, obj.GetName(), err)
	}
	return written, err
}

// isPatchNotApplicable reports whether err is the API server refusing a JSON
// patch that does not apply to the object (its resourceVersion test failed,
// or a path is missing): a 422 without causes, since the server drops the
// patch library's message. Validation errors, the other 422s, carry causes.
func isPatchNotApplicable(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details == nil || len(details.Causes) == 0
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
