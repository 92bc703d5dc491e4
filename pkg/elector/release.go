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

package elector

import (
	"context"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// A leader that shuts down cancels its election, and a renewal may be in
// flight at that moment. The API server can still commit that abandoned
// renewal after client-go's release has read the Lease, and the release's
// update then fails on a conflict: the Lease stays held for a whole lease
// duration, and the standby waits for it to expire instead of taking over
// at once. A release that conflicts is therefore tried again on the Lease as
// it now is, for as long as this instance still holds it.

// RetryingRelease wraps a Lease's lock so that its release survives a late
// renewal.
func RetryingRelease(inner resourcelock.Interface) resourcelock.Interface {
	return &releaseLock{Interface: inner}
}

type releaseLock struct {
	resourcelock.Interface
}

func (l *releaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity != "" {
		return l.Interface.Update(ctx, ler) // an acquisition or a renewal: client-go retries those itself
	}
	retried := false
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if retried {
			// Re-read the Lease: the lock updates the object it last read.
			current, _, err := l.Interface.Get(ctx)
			if err != nil {
				return err
			}
			if current.HolderIdentity != l.Identity() {
				klog.FromContext(ctx).V(2).Info("The Lease changed hands before it could be released", "lease", l.Describe(), "holder", current.HolderIdentity)
				return nil
			}
		}
		retried = true
		return l.Interface.Update(ctx, ler)
	})
}
