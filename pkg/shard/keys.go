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

package shard

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The field paths the API server can select shards by (KEP-5866); its parser
// accepts these two and no other (k8s.io/apiserver/pkg/sharding).
const (
	namespaceField = "object.metadata.namespace"
	uidField       = "object.metadata.uid"
)

// Key is what places an object in a shard: the value that is hashed.
type Key struct {
	// name is for logs and errors.
	name string
	// field is the API server's field path for the value, or "" when the
	// server cannot select by it and only the client filters.
	field string
	// value returns the value to hash.
	value func(metav1.Object) string
}

// Namespace places namespaced objects by their namespace, so that an App,
// its children and the Services and Ingresses the Ingress controller reads
// in one namespace are all in one shard. Mind the names: namespaces that
// differ only in a short suffix hash close together and may share a shard
// (see the package documentation).
var Namespace = Key{name: "namespace", field: namespaceField, value: func(o metav1.Object) string { return o.GetNamespace() }}

// UID places objects by their uid: cluster-scoped owners such as Pipelines,
// whose namespace is empty. A recreated object of the same name has another
// uid and may land in another shard.
var UID = Key{name: "uid", field: uidField, value: func(o metav1.Object) string { return string(o.GetUID()) }}

// ControllerOwner places an object where its controller is: by the
// controller's uid when the controller is of one of the kinds in owners,
// which are sharded by UID (a Pipeline's PV, PVC, Deployment and Service),
// else as Namespace does (an App's children are in their App's namespace,
// and a cluster-scoped object with no such controller lands in the shard of
// namespace ""). Each object is in exactly one shard either way.
//
// The API server cannot select by an owner reference (its shard selector
// knows only object.metadata.uid and object.metadata.namespace), so this key
// is filtered on the client only: a shard's cache holds only its range, but
// every shard still receives every object of the kind.
func ControllerOwner(owners ...schema.GroupKind) Key {
	return Key{name: "controller owner", value: func(o metav1.Object) string {
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ownedBy(ref, owners) {
			return string(ref.UID)
		}
		return o.GetNamespace()
	}}
}

// ownedBy reports whether ref is to one of owners.
func ownedBy(ref *metav1.OwnerReference, owners []schema.GroupKind) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	for _, gk := range owners {
		if gk.Group == gv.Group && gk.Kind == ref.Kind {
			return true
		}
	}
	return false
}

// Serverside reports whether the API server can select by k.
func (k Key) Serverside() bool { return k.field != "" }

// String names k for logs.
func (k Key) String() string { return k.name }
