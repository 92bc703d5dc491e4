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
	"hash/fnv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KeyVersion names how objects are placed: the keys and their hashes. A
// change of it moves objects between shards, so it is part of the Lease
// layout (replicas that place objects differently never lead at once).
// Version 1 hashed namespaces with plain FNV-1a; version 2 mixes them.
const KeyVersion = 2

// uidField is the field path of the uid in the API server's shard selector
// (KEP-5866), whose parser accepts it and object.metadata.namespace only
// (k8s.io/apiserver/pkg/sharding).
const uidField = "object.metadata.uid"

// Key is what places an object in a shard: a hash of one of its values.
type Key struct {
	// name is for logs and errors.
	name string
	// field is the API server's field path for the value, or "" when the
	// server cannot select by it (or hashes it otherwise) and only the
	// client filters.
	field string
	// place returns where the object is in the hash space.
	place func(metav1.Object) uint64
}

// Namespace places namespaced objects by their namespace, so that an App,
// its children and the Services and Ingresses the Ingress controller reads
// in one namespace are all in one shard. The namespace's hash is mixed
// (namespaceHash), so that names that differ only in their last characters
// spread as evenly as random ones; the API server cannot select by that
// hash, so only the client filters.
var Namespace = Key{name: "namespace", place: func(o metav1.Object) uint64 { return namespaceHash(o.GetNamespace()) }}

// UID places objects by their uid: cluster-scoped owners such as Pipelines,
// whose namespace is empty. Uids are random, so the API server's own hash
// (plain FNV-1a) spreads them evenly, and the server can select them. A
// recreated object of the same name has another uid and may land in another
// shard.
var UID = Key{name: "uid", field: uidField, place: func(o metav1.Object) uint64 { return uidHash(string(o.GetUID())) }}

// uidHash is the API server's hash of a value: 64-bit FNV-1a
// (k8s.io/apimachinery/pkg/sharding.HashField, as a number).
func uidHash(value string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(value))
	return h.Sum64()
}

// namespaceHash is FNV-1a mixed by the finalizer of SplitMix64. FNV-1a
// alone moves a value's last bytes into the high bits the ranges are cut
// on barely at all: team-a ... team-z all landed in one shard of 4.
func namespaceHash(value string) uint64 {
	x := uidHash(value)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

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
	return Key{name: "controller owner", place: func(o metav1.Object) uint64 {
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ownedBy(ref, owners) {
			return uidHash(string(ref.UID))
		}
		return namespaceHash(o.GetNamespace())
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
