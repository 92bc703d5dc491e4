package app

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// A leader that shuts down cancels its election, and a renewal may be in
// flight at that moment. The API server can still commit that abandoned
// renewal after client-go's release has read the Lease, and the release's
// update then fails on a conflict: the Lease stays held for a whole lease
// duration, and the standby waits for it to expire instead of taking over
// at once. A release that conflicts is therefore tried again on the Lease as
// it now is, for as long as this instance still holds it.

// releaseTries bounds the release's tries: only this instance's own late
// renewals can conflict with it, and there is at most one in flight.
const releaseTries = 3

// retryingRelease wraps a Lease's lock so that its release survives a late
// renewal.
func retryingRelease(inner resourcelock.Interface) resourcelock.Interface {
	return &releaseLock{Interface: inner}
}

type releaseLock struct {
	resourcelock.Interface
}

func (l *releaseLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	if ler.HolderIdentity != "" {
		return err // an acquisition or a renewal: client-go retries those itself
	}
	for try := 1; try < releaseTries && apierrors.IsConflict(err); try++ {
		current, _, getErr := l.Interface.Get(ctx)
		if getErr != nil {
			return err
		}
		if current.HolderIdentity != l.Identity() {
			klog.FromContext(ctx).V(2).Info("The Lease changed hands before it could be released", "lease", l.Describe(), "holder", current.HolderIdentity)
			return nil
		}
		err = l.Interface.Update(ctx, ler)
	}
	return err
}
