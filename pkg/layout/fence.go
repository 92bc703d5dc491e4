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

package layout

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/membership"
)

// tombstonePrefix begins the holder of a Lease of another layout, named as
// versions before layouts name theirs, that the leading layout holds: a
// replica of such a version, which knows no fence, sees it held.
const tombstonePrefix = "(fenced: layout "

// fencedSeconds is the lease duration the fenced lock shows the elector
// for a Lease it may not acquire: a day, that is, until the real record
// shows again.
const fencedSeconds = 24 * 60 * 60

// Config says whose fence it is.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	// Group is the leader election resource name.
	Group string
	// Layout is this replica's (Of).
	Layout string
	// Legacy classifies a Lease that states no layout by its name
	// (LegacyNames).
	Legacy func(name string) (layout string, ofGroup bool)
	// Ours says whether this replica's layout names a Lease so (a
	// controller that does not shard keeps its name in every layout with a
	// Lease per controller): such a Lease is never held for the layout.
	Ours func(name string) bool
	// LeaseDuration: a Lease not seen to change for that long is not live.
	LeaseDuration time.Duration
	Clock         clock.PassiveClock
}

// Fence admits this replica's acquisitions and renewals only while its
// layout is the group's (see the package documentation).
type Fence struct {
	cfg      Config
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	group    string // the group's label value

	mu       sync.Mutex
	seen     map[string]*sighting // the group's Leases, by name
	reported string               // the refusal last logged
	// blocked: as last judged, a Lease or member of another layout keeps
	// this one from acquiring; opened is told when that ends.
	blocked bool
	opened  membership.Signal

	flipMu sync.Mutex
	// membersListed reads the group's member Leases live, once, for
	// OthersWarm.
	membersListed sync.Once
}

type role int

const (
	unitLease role = iota
	memberLease
	fenceLease
)

// sighting is one of the group's Leases as last seen, and when (on this
// replica's clock) it was seen to change.
type sighting struct {
	role   role
	layout string // "" for a member Lease of a version before layouts
	// legacyName: a name versions before layouts use (LegacyNames); they
	// would take the Lease whatever the fence says.
	legacyName bool
	holder     string
	rv         string
	changed    time.Time
	// offered and warm are what a member Lease states (membership's
	// annotations); statesWarm is false for a version that states none.
	offered, warm []string
	statesWarm    bool
}

// New follows the group's Leases through informer, which must hold every
// Lease of the namespace; Stop ends that.
func New(cfg Config, informer cache.SharedIndexInformer) (*Fence, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	registerMetrics()
	f := &Fence{cfg: cfg, informer: informer, group: membership.GroupLabelValue(cfg.Group), seen: map[string]*sighting{}}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    f.observe,
		UpdateFunc: func(_, obj any) { f.observe(obj) },
		DeleteFunc: f.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("following the Leases of %s for the layout fence: %w", cfg.Namespace, err)
	}
	f.reg = reg
	return f, nil
}

// Stop stops following the Leases.
func (f *Fence) Stop() { _ = f.informer.RemoveEventHandler(f.reg) }

// HasSynced reports whether every Lease of the namespace has been seen.
func (f *Fence) HasSynced() bool { return f.reg.HasSynced() }

// classify says what lease is to the group, if anything.
func (f *Fence) classify(lease *coordinationv1.Lease) (*sighting, bool) {
	switch {
	case lease.Name == FenceName(f.cfg.Group):
		return &sighting{role: fenceLease, layout: lease.Labels[Label]}, true
	case lease.Labels[membership.GroupLabel] == f.group:
		offered, warm, statesWarm := membership.Stated(lease)
		return &sighting{role: memberLease, layout: lease.Labels[Label], offered: offered, warm: warm, statesWarm: statesWarm}, true
	case lease.Labels[GroupLabel] == f.group:
		_, legacyName := f.cfg.Legacy(lease.Name)
		return &sighting{role: unitLease, layout: lease.Labels[Label], legacyName: legacyName}, true
	case lease.Labels[GroupLabel] != "" || lease.Labels[membership.GroupLabel] != "":
		return nil, false // another group's
	}
	if layout, ok := f.cfg.Legacy(lease.Name); ok {
		return &sighting{role: unitLease, layout: layout, legacyName: true}, true
	}
	return nil, false
}

func (f *Fence) observe(obj any) {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		f.record(lease, false)
	}
}

// record notes a version of lease. unseenOnly (a live read) leaves a Lease
// the watch has delivered alone: the watch may hold a newer version by now.
func (f *Fence) record(lease *coordinationv1.Lease, unseenOnly bool) {
	s, ok := f.classify(lease)
	if !ok {
		return
	}
	s.holder, s.rv = ptr.Deref(lease.Spec.HolderIdentity, ""), lease.ResourceVersion
	f.mu.Lock()
	prev := f.seen[lease.Name]
	seen := prev != nil && (unseenOnly || prev.rv == s.rv)
	if !seen {
		s.changed = f.cfg.Clock.Now()
		f.seen[lease.Name] = s
	}
	f.mu.Unlock()
	if !seen {
		f.judge()
	}
}

func (f *Fence) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		f.mu.Lock()
		delete(f.seen, lease.Name)
		f.mu.Unlock()
		f.judge()
	}
}

// judge tells the subscribers when no Lease or member of another layout
// keeps this one from acquiring any more (the last was released, deleted
// or left), so that its electors try at once, not at their next retry.
// (One that stops being live by expiring, with no event, is noticed at
// the next retry.)
func (f *Fence) judge() {
	v := f.view()
	blocked := v.leading != "" || v.fence != f.cfg.Layout && v.memberOf != ""
	f.mu.Lock()
	was := f.blocked
	f.blocked = blocked
	f.mu.Unlock()
	if was && !blocked {
		f.opened.Notify()
	}
}

// Subscribe returns a channel told whenever the last Lease or member of
// another layout stops keeping this layout from acquiring; cancel ends it.
func (f *Fence) Subscribe() (<-chan struct{}, func()) { return f.opened.Subscribe() }

// OthersWarm says whether the live replicas of other layouts, if any, can
// lead at once: each states a unit offered (its caches synced, or a shard it
// builds ahead), and together they state warm every shard unit they offer.
// A replica that leaves as the last of its layout hands a shard over only
// then (or after a lease duration): during a layout change its successor
// builds the new layout's shards while fenced, as a unit's assignee does
// within a layout.
//
// Its first call reads the group's member Leases from the API server: the
// replica asking is leaving, and its watch may not have delivered a
// successor that joined a moment ago (seen under load: the shards then
// moved cold). The read adds only the Leases the watch has not delivered.
func (f *Fence) OthersWarm() bool {
	f.membersListed.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.LeaseDuration/3)
		defer cancel()
		list, err := f.cfg.Client.CoordinationV1().Leases(f.cfg.Namespace).List(ctx,
			metav1.ListOptions{LabelSelector: membership.GroupLabel + "=" + f.group})
		if err != nil {
			return // the watch's view, then
		}
		for i := range list.Items {
			f.record(&list.Items[i], true)
		}
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	return othersWarm(f.seen, f.cfg.Layout, f.cfg.Clock.Now(), f.cfg.LeaseDuration)
}

func othersWarm(seen map[string]*sighting, layout string, now time.Time, leaseDuration time.Duration) bool {
	shards, warm := map[string]bool{}, map[string]bool{}
	for _, s := range seen {
		if s.role != memberLease || s.layout == "" || s.layout == layout || now.Sub(s.changed) >= leaseDuration || !s.statesWarm {
			continue // not a live member of another layout that states what it has warm
		}
		if len(s.offered) == 0 {
			return false // its caches have not synced yet
		}
		for _, u := range s.offered {
			if shardUnit.MatchString(u) {
				shards[u] = true
			}
		}
		for _, u := range s.warm {
			warm[u] = true
		}
	}
	for u := range shards {
		if !warm[u] {
			return false
		}
	}
	return true
}

// shardUnit matches the name of a shard unit, <controller>-<i>-of-<n>.
var shardUnit = regexp.MustCompile(`-[0-9]+-of-[0-9]+$`)

// view is what the fence decides by, from the Leases as last seen.
type view struct {
	fence string // the group's layout; "" before any replica stated one
	// leading is a live unit Lease of another layout, memberOf a live
	// member of another layout ("" for none).
	leading, memberOf string
	// unheld are other layouts' Leases named as versions before layouts
	// name theirs, neither live nor tombstones: the leading layout holds
	// them, so that such versions wait.
	unheld []string
	// tombstones are the Leases held for this replica's layout, and since
	// when this replica has not seen them change.
	tombstones map[string]time.Duration
}

func (f *Fence) view() view {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Clock.Now()
	v := view{tombstones: map[string]time.Duration{}}
	for name, s := range f.seen {
		live := now.Sub(s.changed) < f.cfg.LeaseDuration
		switch {
		case s.role == fenceLease:
			v.fence = s.layout
		case s.holder == f.tombstoneHolder():
			v.tombstones[name] = now.Sub(s.changed)
		case s.layout == f.cfg.Layout:
		case s.role == memberLease:
			if live && s.layout != "" && v.memberOf == "" {
				v.memberOf = s.layout + " (" + name + ")"
			}
		case isTombstone(s.holder):
		case s.holder != "" && live:
			if v.leading == "" || name < v.leading {
				v.leading = name
			}
		case s.legacyName && !f.cfg.Ours(name):
			v.unheld = append(v.unheld, name)
		}
	}
	slices.Sort(v.unheld)
	return v
}

// admit decides whether this replica may acquire a Lease now, stating its
// layout for the group first if no other layout is live.
func (f *Fence) admit(ctx context.Context) error {
	if !f.HasSynced() {
		return fmt.Errorf("%w: the namespace's Leases are not listed yet", ErrFenced)
	}
	v := f.view()
	if v.fence != f.cfg.Layout {
		switch {
		case v.leading != "":
			return f.refuse(ctx, fmt.Sprintf("layout %q leads: Lease %s is live", f.layoutOf(v.leading), v.leading))
		case v.memberOf != "":
			return f.refuse(ctx, "a replica of layout "+v.memberOf+" is running")
		}
		if err := f.flip(ctx, v.fence); err != nil {
			return f.refuse(ctx, err.Error())
		}
		v = f.view()
	}
	if v.leading != "" {
		return f.refuse(ctx, fmt.Sprintf("Lease %s of layout %q is still live", v.leading, f.layoutOf(v.leading)))
	}
	if len(v.unheld) > 0 {
		if err := f.holdUnheld(ctx); err != nil {
			return f.refuse(ctx, err.Error())
		}
	}
	f.report(ctx, "")
	return nil
}

// holdUnheld holds the Leases of other layouts named as versions before
// layouts name theirs, one unit's elector at a time, each written version
// awaited on the watch: the electors of a replica admitted at once would
// otherwise write the same version, and all but one be refused by a
// conflict for a retry period.
func (f *Fence) holdUnheld(ctx context.Context) error {
	f.flipMu.Lock()
	defer f.flipMu.Unlock()
	for _, name := range f.view().unheld {
		if err := f.tombstone(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// Run keeps, while this replica's layout leads, the Leases it holds for it
// (tombstones) renewed, and holds those released since, until ctx is done.
// When no replica of the layout is left, they expire a lease duration
// later, and a version before layouts rolled back to takes them.
func (f *Fence) Run(ctx context.Context) {
	every := f.cfg.LeaseDuration / 3
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		v := f.view()
		if !f.HasSynced() || v.fence != f.cfg.Layout || v.leading != "" {
			return
		}
		_ = f.holdUnheld(ctx) // logged; again at the next tick
		f.flipMu.Lock()
		for name, unchanged := range v.tombstones {
			if unchanged >= every {
				_ = f.tombstone(ctx, name) // a conflict: another replica renewed it
			}
		}
		f.flipMu.Unlock()
	}, every)
}

func (f *Fence) tombstoneHolder() string { return tombstonePrefix + f.cfg.Layout + " leads)" }

// mayRenew says whether this replica may renew a Lease it holds: unless
// another layout is the group's.
func (f *Fence) mayRenew() bool {
	fence := f.view().fence
	return fence == "" || fence == f.cfg.Layout
}

// confirm reads the fence from the API server, after this replica's
// acquisition: a layout stated before the acquisition shows here; one
// stated after sees the acquisition (see the package documentation).
func (f *Fence) confirm(ctx context.Context) error {
	lease, err := f.cfg.Client.CoordinationV1().Leases(f.cfg.Namespace).Get(ctx, FenceName(f.cfg.Group), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the group's layout after the acquisition: %w", err)
	}
	if got := lease.Labels[Label]; got != f.cfg.Layout {
		return fmt.Errorf("%w: layout %q became the group's", ErrFenced, got)
	}
	return nil
}

// flip states this replica's layout as the group's, in place of from, and
// waits until the watch shows it: only then does the view hold every
// acquisition that came before it.
func (f *Fence) flip(ctx context.Context, from string) error {
	f.flipMu.Lock()
	defer f.flipMu.Unlock()
	if f.view().fence == f.cfg.Layout {
		return nil // another unit's elector did it meanwhile
	}
	leases := f.cfg.Client.CoordinationV1().Leases(f.cfg.Namespace)
	name := FenceName(f.cfg.Group)
	var err error
	seenVersion := ""
	switch obj, exists, _ := f.informer.GetStore().GetByKey(f.cfg.Namespace + "/" + name); {
	case !exists:
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.cfg.Namespace,
			Labels: map[string]string{GroupLabel: f.group, Label: f.cfg.Layout}}}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
	default:
		lease := obj.(*coordinationv1.Lease).DeepCopy()
		seenVersion = lease.ResourceVersion
		lease.Labels[Label] = f.cfg.Layout
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{}) // on the version seen: a conflict means another stated first
	}
	switch {
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		// Stated since the version seen, maybe by this replica in an
		// attempt cut short before its watch showed it: the watch tells.
		_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, f.cfg.LeaseDuration, true, func(context.Context) (bool, error) {
			obj, exists, _ := f.informer.GetStore().GetByKey(f.cfg.Namespace + "/" + name)
			return exists && obj.(*coordinationv1.Lease).ResourceVersion != seenVersion, nil
		})
		if f.view().fence == f.cfg.Layout {
			return nil
		}
		return fmt.Errorf("stating layout %q for the group: %w", f.cfg.Layout, err)
	case err != nil:
		return fmt.Errorf("stating layout %q for the group: %w", f.cfg.Layout, err)
	}
	klog.FromContext(ctx).Info("Stated this replica's Lease layout as the group's", "group", f.cfg.Group, "layout", f.cfg.Layout, "previous", from)
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, f.cfg.LeaseDuration, true, func(context.Context) (bool, error) {
		return f.view().fence == f.cfg.Layout, nil
	})
}

// tombstone holds, or renews the hold of, a Lease of another layout named
// as versions before layouts name theirs, on the version seen (so not if
// it was taken meanwhile), for a lease duration.
func (f *Fence) tombstone(ctx context.Context, name string) error {
	obj, exists, _ := f.informer.GetStore().GetByKey(f.cfg.Namespace + "/" + name)
	if !exists {
		return nil
	}
	lease := obj.(*coordinationv1.Lease).DeepCopy()
	renewal := ptr.Deref(lease.Spec.HolderIdentity, "") == f.tombstoneHolder()
	now := metav1.NewMicroTime(f.cfg.Clock.Now())
	lease.Spec.HolderIdentity = ptr.To(f.tombstoneHolder())
	lease.Spec.LeaseDurationSeconds = ptr.To(int32((f.cfg.LeaseDuration + time.Second - 1) / time.Second))
	lease.Spec.RenewTime = &now
	if !renewal {
		lease.Spec.AcquireTime = &now
	}
	if _, err := f.cfg.Client.CoordinationV1().Leases(f.cfg.Namespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("holding Lease %s of layout %q for layout %q: %w", name, f.layoutOf(name), f.cfg.Layout, err)
	}
	if !renewal {
		klog.FromContext(ctx).Info("Holding a Lease of another layout while this one leads, so that versions before layouts, which would take it, wait",
			"lease", name, "layout", f.cfg.Layout)
	}
	// Until the watch shows it, this replica would write the version
	// before again.
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, f.cfg.LeaseDuration, true, func(context.Context) (bool, error) {
		obj, exists, _ := f.informer.GetStore().GetByKey(f.cfg.Namespace + "/" + name)
		return !exists || obj.(*coordinationv1.Lease).ResourceVersion != lease.ResourceVersion, nil
	})
	return nil
}

func (f *Fence) layoutOf(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.seen[name]; s != nil {
		return s.layout
	}
	return ""
}

// refuse reports why this replica may not acquire, logging each new reason
// once.
func (f *Fence) refuse(ctx context.Context, reason string) error {
	f.report(ctx, reason)
	return fmt.Errorf("%w: %s", ErrFenced, reason)
}

func (f *Fence) report(ctx context.Context, reason string) {
	f.mu.Lock()
	changed := f.reported != reason
	f.reported = reason
	f.mu.Unlock()
	if !changed {
		return
	}
	if reason == "" {
		fenced.Set(0)
		klog.FromContext(ctx).Info("This replica's Lease layout is the group's", "layout", f.cfg.Layout)
		return
	}
	fenced.Set(1)
	klog.FromContext(ctx).Info("Acquiring no Lease while another Lease layout leads the group", "layout", f.cfg.Layout, "reason", reason)
}
