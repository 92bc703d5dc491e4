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

// Package elector is what a unit's elector runs around client-go's leader
// election: the Lease lock wrappers (AssignedLock, WatchedLock,
// RetryingRelease, Attempts.Lock), the one watch on the namespace's Leases
// (LeaseWatch) and the sequence of electors it wakes (Attempts). Their
// order, and the invariants they keep, are on the HA layer's page: pkg/ha's
// package documentation.
package elector
