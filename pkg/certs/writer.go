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

package certs

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// WriterElection makes one replica at a time the writer of the Secret, the
// CA ConfigMap and the caBundles: the one holding Lock. Every replica still
// reads the Secret and serves from it.
type WriterElection struct {
	Lock                                      resourcelock.Interface
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// NewWriterElection is the election of the Lease namespace/name, with an
// identity of this host's name and a random suffix.
func NewWriterElection(kube kubernetes.Interface, namespace, name string, leaseDuration, renewDeadline, retryPeriod time.Duration) (*WriterElection, error) {
	hostname, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("getting hostname for the webhook certificates' Lease identity: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: hostname + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("creating the webhook certificates' Lease lock: %w", err)
	}
	return &WriterElection{Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod}, nil
}

// runWriterElection competes for the writer Lease until ctx is done; while
// this replica holds it, m.writing is a context that dies with the Lease.
func (m *Manager) runWriterElection(ctx context.Context) {
	w := m.opts.Writer
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          w.Lock,
			LeaseDuration: w.LeaseDuration, RenewDeadline: w.RenewDeadline, RetryPeriod: w.RetryPeriod,
			// A replica shutting down hands the writing over at once.
			ReleaseOnCancel: true,
			Name:            "webhook-certificates",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leading context.Context) {
					logger.Info("Writing the webhook certificates: holding their Lease", "lease", w.Lock.Describe())
					m.writing.Store(&leading)
					m.queue.Add(syncKey)
					<-leading.Done()
				},
				OnStoppedLeading: func() {
					m.writing.Store(nil)
					logger.Info("No longer writing the webhook certificates", "lease", w.Lock.Describe())
				},
			},
		})
		if err != nil {
			logger.Error(err, "Cannot elect the webhook certificates' writer; serving only what another replica writes")
			return
		}
		elector.Run(ctx)
	}
}

// writerContext is the context writes are made with, nil when this replica
// must not write: without an election every replica writes (compare-then-
// write keeps them convergent); with one, only the Lease holder, under a
// context that dies with the Lease.
func (m *Manager) writerContext(ctx context.Context) context.Context {
	if m.opts.Writer == nil {
		return ctx
	}
	leading := m.writing.Load()
	if leading == nil || (*leading).Err() != nil {
		return nil
	}
	return *leading
}
