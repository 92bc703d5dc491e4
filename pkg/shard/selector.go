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
	apisharding "k8s.io/apimachinery/pkg/sharding"
)

// Selector is the ListOptions.ShardSelector that asks the API server for s's
// range of k, such as
// "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')",
// formatted by apimachinery; "" when the server cannot select by k or there
// is a single shard (--shards=1 sends what it always sent).
func (s Shard) Selector(k Key) string {
	if !k.Serverside() || s.Count == 1 {
		return ""
	}
	return apisharding.NewSelector(s.requirement(k.field)).String()
}
