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

// Package shard splits the work of one controller across --shards=N shards
// by hash range, and gives each shard informers that list and watch only its
// range.
//
// # Ranges
//
// A value (a namespace, a uid) is hashed with 64-bit FNV-1a, as the API
// server's sharded list and watch hashes it (KEP-5866, Kubernetes 1.36,
// alpha gate ShardedListAndWatch). Shard i of N is the range
// [floor(i*2^64/N), floor((i+1)*2^64/N)): lower bound inclusive, upper bound
// exclusive, the last range ending at 2^64, which the API server writes
// 0x10000000000000000. The hashing, the bound comparison and the selector's
// text are apimachinery's (k8s.io/apimachinery/pkg/sharding); the echo of a
// selector is read range by range (rangesOf), and a test holds that reading
// to the server's own parser (k8s.io/apiserver/pkg/sharding, kept out of the
// binary because it brings CEL).
//
// # Keys
//
// Namespaced objects are placed by namespace (Namespace), cluster-scoped
// owners by uid (UID), and the children of a cluster-scoped owner by their
// controller's uid (ControllerOwner), so that children land in their owner's
// shard. The API server can select by namespace and uid only; the
// controller-owner key is filtered on the client alone.
//
// # Selection
//
// NewListerWatcher wraps an informer's ListWatch. Every list and watch sends
// ListOptions.ShardSelector, e.g.
// shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000'),
// and every answer is filtered on the client by the same range
// (controller.FilteredListerWatcher). A server that honours the selector
// sends only the range and the filter drops nothing; one without the gate
// ignores it silently and the filter does the selecting. Where the range is
// selected is probed once per informer (Probe) and logged and exported as
// controller_manager_shard_selection{path="server"|"client"}; what the
// client dropped is controller_manager_shard_client_filtered_total.
//
// # Limits
//
//   - FNV-1a mixes the last bytes of a value into the high bits of its hash
//     poorly, and ranges are cut on the high bits: namespaces that differ
//     only in a short suffix (team-0 ... team-9, tenant-000 ... tenant-099)
//     can all land in one shard. Uids are random and spread evenly.
//   - On the client path every shard still receives every object of the
//     kind (the network and decoding cost is not divided, only the cache
//     and the work); the controller-owner key is always on that path.
//   - A recreated cluster-scoped owner has a new uid and may change shard.
//   - A change of an object's key value moves it between shards: the old
//     shard sees a deletion, the new one an addition. Namespace and uid never
//     change; a controller reference can.
package shard
