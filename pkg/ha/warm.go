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
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/membership"
)

// A shard unit caches only its range, so a replica builds one only for the
// units it leads or is assigned. When a unit moves (a replica joins, the
// assignment rebalances, a Lease layout changes), its new assignee would
// start cold: take the Lease, then list its range. Instead the assignee
// builds the unit and syncs its caches as soon as membership assigns it
// here, and states it warm in its member Lease; the holder hands the unit
// over only then (drainWhenUnassigned), or after a lease duration if the
// assignee never gets there.

// coldUnit builds a shard unit: its controller, on informers of its own
// that list and watch only its range, ahead of leading it while it is
// assigned here (warmUnits), or when it leads.
type coldUnit struct {
	p *perUnit
	u Unit
}

// take returns the unit's set for a term of leading: the one built while
// it was assigned here, else one built now. Its Stop ends the term.
func (c *coldUnit) take(ctx context.Context) (Set, error) {
	set := c.p.warm.take(c.u.Name, c.p.members)
	if set == nil {
		var err error
		if set, err = c.start(ctx); err != nil {
			c.p.warm.done(c.u.Name)
			return nil, err
		}
	}
	return &termSet{Set: set, done: func() { c.p.warm.done(c.u.Name) }}, nil
}

// start builds the unit and starts its informers; its controller waits for
// their caches before it works, as a cold standby's does.
func (c *coldUnit) start(ctx context.Context) (Set, error) {
	return c.p.cfg.Controllers.Start(ctx, []Unit{c.u}, c.p.guardFor)
}

// termSet is a shard unit's set for one term of leading: stopping it ends
// the term.
type termSet struct {
	Set
	done func()
}

func (t *termSet) Stop() {
	t.Set.Stop()
	t.done()
}

// warmUnits are the shard units this replica stands by for: assigned here,
// led elsewhere (or by nobody yet), built, their informers running.
type warmUnits struct {
	mu      sync.Mutex
	sets    map[string]*warmSet
	leading map[string]bool // taken by this replica's elector
	failed  map[string]bool // a build failed: not tried again while assigned here
}

type warmSet struct {
	set          Set
	stopSyncWait context.CancelFunc
}

func newWarmUnits() *warmUnits {
	return &warmUnits{sets: map[string]*warmSet{}, leading: map[string]bool{}, failed: map[string]bool{}}
}

// follow keeps cold's unit warm while membership assigns it here and this
// replica does not lead it, until ctx is done.
func (w *warmUnits) follow(ctx context.Context, members *membership.Members, cold *coldUnit, every time.Duration) {
	name := cold.u.Name
	changes, unsubscribe := members.Subscribe()
	defer unsubscribe()
	defer w.stop(name, members)
	ticker := time.NewTicker(every) // the end of a term of leading tells nobody
	defer ticker.Stop()
	for {
		mine := members.Mine(name)
		w.mu.Lock()
		ws, leading := w.sets[name], w.leading[name]
		if !mine {
			delete(w.failed, name)
		}
		failed := w.failed[name]
		w.mu.Unlock()
		switch {
		case mine && !leading && ws == nil && !failed:
			w.start(ctx, members, cold)
		case (!mine || leading) && ws != nil:
			w.stop(name, members)
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-ticker.C:
		}
	}
}

// start builds the unit and starts its informers; once its caches have
// synced, membership states it warm.
func (w *warmUnits) start(ctx context.Context, members *membership.Members, cold *coldUnit) {
	name := cold.u.Name
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "controller", name)
	set, err := cold.start(ctx)
	if err != nil {
		logger.Error(err, "Cannot build the shard assigned here ahead of taking it; it is built when taken")
		w.mu.Lock()
		w.failed[name] = true
		w.mu.Unlock()
		return
	}
	syncCtx, stopSyncWait := context.WithCancel(ctx)
	w.mu.Lock()
	w.sets[name] = &warmSet{set: set, stopSyncWait: stopSyncWait}
	w.mu.Unlock()
	go func() {
		if cache.WaitForCacheSync(syncCtx.Done(), func() bool { return set.Synced(name) }) {
			w.mu.Lock()
			still := w.sets[name] != nil && w.sets[name].set == set
			w.mu.Unlock()
			if still {
				members.SetWarm(name, true)
				logger.V(2).Info("The shard assigned here is warm: its caches synced before it is taken")
			}
		}
	}()
}

// stop stops the unit's warm set, if any, and says it is no longer warm.
func (w *warmUnits) stop(name string, members *membership.Members) {
	w.mu.Lock()
	ws := w.sets[name]
	delete(w.sets, name)
	w.mu.Unlock()
	if ws == nil {
		return
	}
	members.SetWarm(name, false)
	ws.stopSyncWait()
	ws.set.Stop()
}

// take hands the unit's warm set, if any, to its elector, which now leads
// it and stops the set when it stops leading (done).
func (w *warmUnits) take(name string, members *membership.Members) Set {
	w.mu.Lock()
	ws := w.sets[name]
	delete(w.sets, name)
	w.leading[name] = true
	w.mu.Unlock()
	if ws == nil {
		return nil
	}
	members.SetWarm(name, false)
	ws.stopSyncWait()
	return ws.set
}

// done says the elector stopped leading the unit.
func (w *warmUnits) done(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.leading, name)
}
