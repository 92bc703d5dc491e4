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
	"math"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ndsl/controller-manager/pkg/membership"
)

// drainWhenUnassigned returns a channel closed when membership has
// assigned the unit to another replica (a handover, recorded in
// handedOver, or this replica's shutdown, after which it leaves) and that
// replica is warm (it states the unit's caches synced, or builds none
// ahead), or, with none left of this layout, when othersWarm says the
// replicas of another layout are (nil: at once), or after waitWarm: either
// way the unit drains gracefully.
func drainWhenUnassigned(ctx context.Context, members *membership.Members, unit string, handedOver *atomic.Bool, waitWarm time.Duration,
	othersWarm func() bool) (<-chan struct{}, func()) {
	drain := make(chan struct{})
	stop := make(chan struct{})
	changes, unsubscribe := members.Subscribe()
	go func() {
		defer close(drain)
		defer unsubscribe() // a subscription per term of leading, ended with it
		var unassigned, poll <-chan time.Time
		shutdown := ctx.Done()
		for {
			mine := members.Mine(unit)
			if mine && shutdown != nil {
				unassigned = nil
			} else {
				if unassigned == nil {
					unassigned = time.After(waitWarm)
				}
				// Shutting down, the unit is still assigned here until
				// Leave has judged; the others see it gone after.
				last := members.Owner(unit) == "" // the last of this layout
				if !mine && members.Ready(unit) && (!last || othersWarm == nil || othersWarm()) {
					handedOver.Store(true)
					return
				}
				if !mine && last && othersWarm != nil && poll == nil {
					// Another layout's member Leases tell no subscriber.
					ticker := time.NewTicker(100 * time.Millisecond)
					defer ticker.Stop()
					poll = ticker.C
				}
			}
			select {
			case <-poll:
			case <-shutdown:
				// This replica leaves: the unit is assigned elsewhere
				// as soon as the others see it gone.
				shutdown = nil
			case <-stop:
				return
			case <-changes:
			case <-unassigned:
				handedOver.Store(true)
				return
			}
		}
	}()
	var once sync.Once
	return drain, func() { once.Do(func() { close(stop) }) }
}

// newBuildBackoff is the delay before a shard whose build failed competes
// again: 1 s, doubling up to 2 minutes.
func newBuildBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 2 * time.Minute}
}
