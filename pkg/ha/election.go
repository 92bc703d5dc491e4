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

package ha

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/ndsl/controller-manager/pkg/elector"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/shard"
)

// election is what every Lease of this replica shares: its identity, the
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
func newElection(ctx context.Context, cfg Config, leases int) (*election, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("getting hostname for the leader election identity: %w", err)
	}
	el := &election{identity: hostname + "_" + string(uuid.NewUUID()), namespace: cfg.Namespace,
		group: cfg.LeaderElection.ResourceName, layout: layout.Of(cfg.PerController, cfg.Shards, shard.KeyVersion)}
	c := rest.CopyConfig(cfg.ClientConfig)
	leaseBudget(c, leases, cfg.LeaderElection.RetryPeriod.Duration)
	if el.client, err = kubernetes.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("building the leader election client: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: el.client.CoreV1().Events(el.namespace)})
	el.recorder = broadcaster.NewRecorder(cfg.Scheme, corev1.EventSource{Component: "controller-manager", Host: hostname})
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
func newFence(cfg Config, el *election, leases *elector.LeaseWatch) (*layout.Fence, error) {
	known := make([]string, len(cfg.Known))
	for i, c := range cfg.Known {
		known[i] = c.Name
	}
	return layout.New(layout.Config{
		Client:        el.client,
		Namespace:     el.namespace,
		Group:         el.group,
		Layout:        el.layout,
		Legacy:        layout.LegacyNames(el.group, known),
		Ours:          cfg.namesOwnLease,
		LeaseDuration: cfg.LeaderElection.LeaseDuration.Duration,
	}, leases.Informer())
}

// namesOwnLease says whether this replica's layout would name a Lease so,
// for any known controller (other replicas of the layout may run others).
func (cfg Config) namesOwnLease(name string) bool {
	group := cfg.LeaderElection.ResourceName
	if !cfg.PerController {
		return name == group
	}
	for _, u := range Units(cfg.Known, cfg.Shards) {
		if name == LeaseName(group, u.Name) {
			return true
		}
	}
	return false
}
