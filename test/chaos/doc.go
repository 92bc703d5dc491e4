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

// Package chaos is the fault-injection suite of issues 12 and 22: the
// manager binary runs as several processes with leader election and its
// webhooks on (admission on every write, conversion on every v1 read,
// behind a stand-in Service that routes by readiness) against a local
// control plane whose API server keeps an audit log, while the suite drives
// load (Apps, Pipelines, annotated Services, edits, deletes) and injects
// faults on a seeded schedule (kill -9 and SIGSTOP of the leader,
// kube-apiserver and etcd restarts, a stolen Lease, conflicting edits and
// deletions of children, PVCs and namespaces, blockers removed late, a
// rollout of every replica under client traffic, a replica with other
// certificate names, a skewed clock). After the faults it asserts:
// convergence within a stated bound, one controller-owned child of each
// kind per owner, no write by a process without the Lease covering it
// (every Lease, judged by the renew deadline, from the audit log, one
// ServiceAccount per process), writes after a theft bounded by the retry
// period, no double leadership, no user-owned object touched, status writes
// bounded by real changes, no crash loop, no failed client request during a
// rollout, certificate Secret writes bounded.
//
// The seed and the schedule are printed first; CHAOS_SEED replays one. See
// config.go for the other knobs, and docs/reliability.md for the figures.
package chaos
