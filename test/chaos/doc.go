// Package chaos is the fault-injection suite of issue 12: the manager binary
// runs as several processes with leader election against a local control
// plane whose API server keeps an audit log, while the suite drives load
// (Apps, Pipelines, annotated Services, edits, deletes) and injects faults on
// a seeded schedule (kill -9 and SIGSTOP of the leader, kube-apiserver and
// etcd restarts, a stolen Lease, conflicting edits and deletions of
// children, PVCs and namespaces, blockers removed late). After the faults it
// asserts: convergence within a stated bound, one controller-owned child of
// each kind per owner, no write by a process without the Lease (from the
// audit log, one ServiceAccount per process), no user-owned object touched,
// status writes bounded by real changes, no crash loop.
//
// The seed and the schedule are printed first; CHAOS_SEED replays one. See
// config.go for the other knobs, and docs/reliability.md for the figures.
package chaos
