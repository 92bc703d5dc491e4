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

package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/elector"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/shard"
)

// leaderHealthTolerance is how long past its lease expiry a leader that
// failed to renew still reports healthy, as in kube-controller-manager.
const leaderHealthTolerance = 20 * time.Second

// leaseLostGrace bounds how long a manager that lost its Lease waits for
// its cancelled workers before returning.
const leaseLostGrace = 2 * time.Second

// inClusterNamespaceFile holds the pod's namespace when running in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// runWithLeaderElection runs the controllers' workers only while this
// instance holds the Lease. A warm standby builds the controllers and syncs
// their caches before it competes; a cold one only once it leads. On
// shutdown (ctx done) the controllers stop first, then the Lease is
// released; standbys watch it and try at once (see pkg/elector). Losing
// the Lease while leading stops the controllers and returns
// ErrLeaderElectionLost.
func (m *Manager) runWithLeaderElection(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	le := m.opts.LeaderElection

	el, err := m.newElection(ctx, 1)
	if err != nil {
		return err
	}
	defer el.shutdown()
	identity, namespace := el.identity, el.namespace
	// The namespace's Leases: this Lease's release wakes a standby at once
	// (pkg/elector), and the layout fence follows the group's.
	watchCtx, stopWatching := context.WithCancel(ctx)
	leases := elector.NewLeaseWatch(watchCtx, el.client, namespace)
	defer func() { stopWatching(); leases.Shutdown() }()
	fence, err := m.newFence(el, leases)
	if err != nil {
		return err
	}
	defer fence.Stop()
	go fence.Run(watchCtx)
	// The fence judges from the namespace's Leases: the election starts
	// once they are listed, or its first try would find it refused and wait
	// a retry period.
	if !cache.WaitForCacheSync(ctx.Done(), fence.HasSynced) {
		return nil
	}
	attempts := &elector.Attempts{}
	defer leases.Watch(watchCtx, le.ResourceName, el.identity, attempts.Wake, nil).Stop()
	// Another Lease layout's last Lease released: try at once.
	opened, unsubscribe := fence.Subscribe()
	defer unsubscribe()
	go func() {
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-opened:
				attempts.Wake()
			}
		}
	}()
	lock, err := el.lock(le.ResourceName)
	if err != nil {
		return err
	}
	lock = attempts.Lock(fence.Lock(lock))
	// The controllers' clients refuse to write unless this Lease was renewed
	// within the renew deadline (see pkg/leaseguard).
	if m.wrapLock != nil {
		lock = m.wrapLock(lock)
	}
	m.guard = leaseguard.New(le.ResourceName, le.RenewDeadline.Duration)
	// The wrappers' order, and why, is in the leaseguard package doc.
	lock = m.guard.Lock(lock)

	// A warm standby's informers and event handlers run from now on; its
	// clients carry the guard, which refuses every write until it leads.
	var warm *controllerSet
	if m.opts.HA.Standby == options.StandbyWarm {
		if warm, err = m.startControllers(ctx, m.guardForAll); err != nil {
			return err
		}
		defer warm.stop()
	}

	// The election runs on its own context so that the Lease is released
	// only after the controllers have stopped, not as soon as ctx is done.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var started, lost atomic.Bool
	var runErr error
	controllersDone := make(chan struct{})
	context.AfterFunc(ctx, func() {
		if started.Load() {
			<-controllersDone
		}
		stopElection()
	})

	logger.Info("Waiting to acquire the lease", "lease", namespace+"/"+le.ResourceName, "identity", identity, "standby", m.opts.HA.Standby)
	err = attempts.Run(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		WatchDog:        m.electionHealth,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadingCtx context.Context) {
				defer close(controllersDone)
				if ctx.Err() != nil {
					return
				}
				started.Store(true)
				m.status.setLeading(m.enabled, true)
				logger.Info("Started leading")
				// leadingCtx dies with the Lease: every reconcile in flight
				// is cancelled at once. A shutdown (ctx done) only drains;
				// the Lease is released after that.
				runCtx, cancel := context.WithCancel(leadingCtx)
				defer cancel()
				set := warm
				if set == nil {
					if set, runErr = m.startControllers(runCtx, m.guardForAll); runErr != nil {
						stopElection()
						return
					}
					defer set.stop()
				}
				m.runControllers(runCtx, ctx.Done(), set, set.controllers)
				// Stopped: no longer leading, before the Lease is released
				// and another replica can say it leads.
				m.status.setLeading(m.enabled, false)
			},
			OnStoppedLeading: func() {
				m.guard.Lost()
				m.status.setLeading(m.enabled, false)
				if ctx.Err() == nil && started.Load() {
					lost.Store(true)
				}
			},
			OnNewLeader: func(id string) {
				if id != identity {
					logger.Info("New leader elected", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	if runErr != nil {
		return runErr
	}
	if lost.Load() {
		// The reconciles in flight were cancelled with the Lease and the
		// lease guard refuses their writes: exit now, as
		// kube-controller-manager does, after a brief moment for the
		// workers to return and log.
		select {
		case <-controllersDone:
		case <-time.After(leaseLostGrace):
		}
		return ErrLeaderElectionLost
	}
	if started.Load() {
		logger.Info("Stopped leading and released the lease")
	} else {
		logger.Info("Stopped without having led")
	}
	return nil
}

// election is what every Lease of this instance shares: its identity, the
// namespace, the client and the recorder of leader election events.
type election struct {
	identity, namespace string
	// group is the leader election resource name, layout this replica's
	// Lease layout (pkg/layout); every unit Lease is labelled with both.
	group, layout string
	client        kubernetes.Interface
	recorder      record.EventRecorder
	shutdown      func()
}

// newElection builds the election of leases Leases (1, or the units in
// per-controller mode) and this replica's member Lease.
func (m *Manager) newElection(ctx context.Context, leases int) (*election, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("getting hostname for the leader election identity: %w", err)
	}
	el := &election{identity: hostname + "_" + string(uuid.NewUUID()), namespace: leaseNamespace(m.opts.LeaderElection.ResourceNamespace),
		group: m.opts.LeaderElection.ResourceName, layout: layout.Of(m.opts.HA.PerController, m.opts.HA.Shards, shard.KeyVersion)}
	cfg := m.clientConfig("leader-election")
	leaseBudget(cfg, leases, m.opts.LeaderElection.RetryPeriod.Duration)
	if el.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: el.client.CoreV1().Events(el.namespace)})
	el.recorder = broadcaster.NewRecorder(Scheme, corev1.EventSource{Component: "controller-manager", Host: hostname})
	el.shutdown = broadcaster.Shutdown
	return el, nil
}

// leaseBudget raises the Lease client's rate limit to what its Leases
// need, if --kube-api-qps and --kube-api-burst give less. A replica may
// hold every Lease (one replica left, or a rollout), and renews each once
// per retry period; at --shards=64 that is 32 requests a second with the
// default retry period, beyond --kube-api-qps's 20, and every renewal waited
// about 1.2 s on the client before it was sent. Half as much again is left
// for acquisitions, releases and the member Lease.
func leaseBudget(cfg *rest.Config, leases int, retry time.Duration) {
	if cfg.QPS < 0 || cfg.RateLimiter != nil || retry <= 0 {
		return // no client-side limit, or one of the caller's
	}
	need := float32(1.5 * float64(leases+1) / retry.Seconds())
	cfg.QPS = max(cfg.QPS, need)
	cfg.Burst = max(cfg.Burst, leases+1)
}

// lock is the Lease called name, labelled with the group and the layout,
// with a release that survives a late renewal (elector.RetryingRelease).
func (el *election) lock(name string) (resourcelock.Interface, error) {
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, el.namespace, name,
		el.client.CoreV1(), el.client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: el.identity, EventRecorder: el.recorder})
	if err != nil {
		return nil, fmt.Errorf("creating the leader election lock %s: %w", name, err)
	}
	if ll, ok := lock.(*resourcelock.LeaseLock); ok {
		ll.Labels = layout.Labels(el.group, el.layout)
	}
	return elector.RetryingRelease(lock), nil
}

// newFence follows the group's Leases on leases, the informer on every
// Lease of the namespace, and admits this replica's acquisitions only while
// its layout leads (pkg/layout).
func (m *Manager) newFence(el *election, leases *elector.LeaseWatch) (*layout.Fence, error) {
	return layout.New(layout.Config{
		Client:        el.client,
		Namespace:     el.namespace,
		Group:         el.group,
		Layout:        el.layout,
		Legacy:        layout.LegacyNames(el.group, m.registry.Names()),
		Ours:          m.namesOwnLease,
		LeaseDuration: m.opts.LeaderElection.LeaseDuration.Duration,
	}, leases.Informer())
}

// namesOwnLease says whether this replica's layout would name a Lease so,
// for any controller of the registry (other replicas of the layout may
// run others).
func (m *Manager) namesOwnLease(name string) bool {
	le, ha := m.opts.LeaderElection, m.opts.HA
	if !ha.PerController {
		return name == le.ResourceName
	}
	for _, u := range units(m.registry, ha.Shards) {
		if name == controllerLease(le.ResourceName, u.Name) {
			return true
		}
	}
	return false
}

// leaseNamespace is the flag's value, else the pod's namespace, else "default".
func leaseNamespace(flag string) string {
	if flag != "" {
		return flag
	}
	if data, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}

// guardForAll gives every controller the single Lease's guard.
func (m *Manager) guardForAll(string) *leaseguard.Guard { return m.guard }
