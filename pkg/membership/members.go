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

package membership

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/controller"
)

const (
	// GroupLabel names the group a member Lease belongs to: the manager's
	// leader election resource name.
	GroupLabel = "manager.ndsl.cn/member-of"
	// UnitsAnnotation lists, comma-separated, the units a member offers, so
	// that a unit only goes to a replica that can run it (replicas of two
	// versions, or with different --controllers, during a rollout) and has
	// its caches ready (Offer).
	UnitsAnnotation = "manager.ndsl.cn/units"
	// HoldingAnnotation lists, comma-separated, the units whose Leases a
	// member holds, so that the assignment leaves them where they are
	// (AssignKeeping). Used only while every live member states it: a
	// replica of an earlier version assigns without it.
	HoldingAnnotation = "manager.ndsl.cn/holding"
	// WarmAnnotation lists, comma-separated, the units assigned to a
	// member whose caches it has built and synced without holding their
	// Leases: their holder hands them over once they are warm (Ready).
	WarmAnnotation = "manager.ndsl.cn/warm"
)

// Config says who this replica is and how members are judged.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	// Group is the leader election resource name; member Leases are named
	// and labelled after it.
	Group    string
	Identity string
	// Units this replica offers from the start; Offer adds the others
	// once it can run them.
	Units []string
	// LeaseDuration: a member whose Lease this replica has not seen change
	// for that long is gone.
	LeaseDuration time.Duration
	// JudgeInterval is how often this replica re-judges the others. It
	// renews its own Lease every third of LeaseDuration: two renewals may
	// fail before the others count it gone.
	JudgeInterval time.Duration
	Clock         clock.WithTicker
	// Labels are stamped on the member Lease besides the group's (the
	// replica's Lease layout, pkg/layout). A member Lease that states
	// another value for one of them is not a member here: replicas of two
	// Lease layouts share no units (their fence lets one lead), and one of
	// the other layout must never be assigned a unit it may not take.
	Labels map[string]string
}

// Members is this replica's view of the group: who is live, and so which
// units are its own.
type Members struct {
	cfg  Config
	name string // this replica's member Lease

	mu      sync.Mutex
	seen    map[string]*sighting // by Lease name, other members only
	renewed time.Time            // this replica's last successful renewal, on its clock
	written *coordinationv1.Lease
	leaving bool
	holding map[string]bool // units whose Leases this replica holds
	offered map[string]bool // units this replica offers
	warm    map[string]bool // units this replica stands by for, caches synced
	// gen counts the changes of holding and offered; writtenGen is the
	// count the member Lease last stated.
	gen, writtenGen int
	assigned        map[string]string // unit → member, from the live members
	live            []string
	// changes wakes Subscribe's callers.
	changes Signal
	// offer wakes Run to state a new offer at once, not at the next tick.
	offer chan struct{}
	// writing is held by a renewal and by Leave for their writes.
	writing sync.Mutex
}

// sighting is a member Lease as this replica last saw it, and when (on this
// replica's clock) it last saw it change.
type sighting struct {
	identity        string
	units           []string
	holding         []string
	statesHolding   bool // the Lease has the holding annotation
	warm            []string
	statesWarm      bool // the Lease has the warm annotation
	resourceVersion string
	changed         time.Time
}

// New returns the membership of this replica; Run makes it live.
func New(cfg Config) *Members {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	registerMetrics()
	offered := map[string]bool{}
	for _, u := range cfg.Units {
		offered[u] = true
	}
	return &Members{
		cfg:     cfg,
		name:    LeaseName(cfg.Group, cfg.Identity),
		seen:    map[string]*sighting{},
		holding: map[string]bool{},
		offered: offered,
		warm:    map[string]bool{},
		offer:   make(chan struct{}, 1),
	}
}

// Offer adds a unit to those this replica offers, once it can run it (its
// caches have synced). Run writes it to the member Lease at once, and this
// replica, like the others, assigns from what the Lease states.
func (m *Members) Offer(unit string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.offered[unit] {
		return
	}
	m.offered[unit] = true
	m.gen++
	select {
	case m.offer <- struct{}{}:
	default:
	}
}

// SetWarm records whether this replica stands by for a unit assigned to it,
// its caches synced: written at once, so that the unit's holder hands it
// over (Ready).
func (m *Members) SetWarm(unit string, warm bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.warm[unit] == warm {
		return
	}
	if warm {
		m.warm[unit] = true
	} else {
		delete(m.warm, unit)
	}
	m.gen++
	select {
	case m.offer <- struct{}{}:
	default:
	}
}

// Ready says whether the unit's assignee can take it over at once: it
// states the unit warm, or it states no warm units at all (a replica of
// an earlier version, which builds a unit when it takes it), or there is
// none.
func (m *Members) Ready(unit string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	owner := m.assigned[unit]
	if owner == m.cfg.Identity || owner == "" {
		return true // nobody else to wait for (the last replica leaving)
	}
	for _, s := range m.seen {
		if s.identity == owner {
			return !s.statesWarm || slices.Contains(s.warm, unit)
		}
	}
	return false
}

// SetHolding records whether this replica holds the unit's Lease; the
// member Lease states it at the next judging, which reads it from there
// like the others do.
func (m *Members) SetHolding(unit string, holding bool) {
	m.mu.Lock()
	if m.holding[unit] == holding {
		m.mu.Unlock()
		return
	}
	if holding {
		m.holding[unit] = true
	} else {
		delete(m.holding, unit)
	}
	m.gen++
	m.mu.Unlock()
}

// sortedKeys is set's keys, sorted.
func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for u := range set {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// LeaseName is the member Lease of identity in group.
func LeaseName(group, identity string) string {
	h := fnv.New64a()
	h.Write([]byte(identity))
	return fmt.Sprintf("%s-member-%016x", group, h.Sum64())
}

// GroupLabelValue is the label value of group (a label value holds 63
// characters): of GroupLabel here, of pkg/layout's group label on unit
// Leases.
func GroupLabelValue(group string) string {
	if len(group) <= 63 {
		return group
	}
	h := fnv.New64a()
	h.Write([]byte(group))
	return fmt.Sprintf("%.46s-%016x", group, h.Sum64())
}

// Run announces this replica and follows the others until ctx is done. It
// returns an error only if the member Leases cannot be watched.
func (m *Members) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(m.cfg.Client, 0,
		informers.WithNamespace(m.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{GroupLabel: GroupLabelValue(m.cfg.Group)}.String()
		}),
		informers.WithTransform(controller.Compact))
	informer := factory.Coordination().V1().Leases().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.observe,
		UpdateFunc: func(_, obj any) { m.observe(obj) },
		DeleteFunc: m.forget,
	}); err != nil {
		return fmt.Errorf("watching the member Leases: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil
	}

	// Renewals run on a timer of their own, each with a deadline, so that a
	// slow or hung request neither stops the judging nor outlasts the two
	// renewals after it that the others wait for.
	var renewing sync.WaitGroup
	renewing.Go(func() { m.renewLoop(ctx) })
	defer renewing.Wait()
	ticker := m.cfg.Clock.NewTicker(m.cfg.JudgeInterval)
	defer ticker.Stop()
	for {
		m.collect(ctx, informer.GetStore())
		m.judge()
		// A member is dropped the moment it expires, not up to a judge
		// interval later: a killed replica's units move a lease duration
		// after its last renewal, as its unit Leases expire.
		var expiry <-chan time.Time
		var timer clock.Timer
		if next, ok := m.nextExpiry(); ok {
			timer = m.cfg.Clock.NewTimer(next.Sub(m.cfg.Clock.Now()))
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-ticker.C():
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// nextExpiry is when the first live member other than this replica
// expires, if one does.
func (m *Members) nextExpiry() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	var next time.Time
	for _, s := range m.seen {
		at := s.changed.Add(m.cfg.LeaseDuration)
		if s.identity != "" && at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// renewLoop renews this replica's member Lease when due (renewIfDue),
// checking every JudgeInterval and at once on a new offer, until ctx is
// done. Each request gets a third of the lease duration. A renewal that
// changed what the Lease states is judged at once; Run judges every tick.
func (m *Members) renewLoop(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := m.cfg.Clock.NewTicker(m.cfg.JudgeInterval)
	defer ticker.Stop()
	for {
		renewCtx, cancel := context.WithTimeout(ctx, m.cfg.LeaseDuration/3)
		renewed, err := m.renewIfDue(renewCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Cannot renew this replica's member Lease", "lease", m.cfg.Namespace+"/"+m.name)
		}
		if renewed {
			m.judge()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-m.offer:
		}
	}
}

// Owner is the member the unit is assigned to ("" if none).
func (m *Members) Owner(unit string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assigned[unit]
}

// Mine says whether the unit is assigned to this replica.
func (m *Members) Mine(unit string) bool { return m.Owner(unit) == m.cfg.Identity }

// Live is the identities of the live members, this replica included while
// its own renewals succeed.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.live)
}

// Subscribe returns a channel that receives a value after each change of
// the assignment or of what a member states warm (coalesced: a slow reader
// misses no change, only repeats),
// and the function that ends the subscription.
func (m *Members) Subscribe() (<-chan struct{}, func()) { return m.changes.Subscribe() }

// Leave stops this replica's announcement and deletes its member Lease, so
// that the others take its units as soon as it releases them, not a lease
// duration later. Run may go on, so that this replica sees its units'
// new assignees state them warm (Ready) before it hands them over; it
// writes nothing more.
func (m *Members) Leave(ctx context.Context) error {
	// A renewal in flight would create the Lease again after the delete.
	m.writing.Lock()
	defer m.writing.Unlock()
	m.mu.Lock()
	m.leaving = true
	written := m.written
	m.mu.Unlock()
	m.judge()
	if written == nil {
		return nil
	}
	err := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace).Delete(ctx, m.name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &written.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// renewIfDue renews this replica's member Lease if a third of the lease
// duration has passed since the last renewal, or the units it holds or
// offers changed; it reports whether it wrote.
func (m *Members) renewIfDue(ctx context.Context) (bool, error) {
	m.mu.Lock()
	due := m.renewed.IsZero() || m.cfg.Clock.Since(m.renewed) >= m.cfg.LeaseDuration/3 || m.gen != m.writtenGen
	m.mu.Unlock()
	if !due {
		return false, nil
	}
	err := m.renew(ctx)
	return err == nil, err
}

// renew writes this replica's member Lease: its units and a new renewTime,
// so that its resourceVersion changes (what the others judge it by).
func (m *Members) renew(ctx context.Context) error {
	m.writing.Lock()
	defer m.writing.Unlock()
	m.mu.Lock()
	written, leaving := m.written, m.leaving
	st := stated{offered: sortedKeys(m.offered), holding: sortedKeys(m.holding), warm: sortedKeys(m.warm)}
	gen := m.gen
	m.mu.Unlock()
	if leaving {
		return nil
	}
	leases := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace)
	now := metav1.NewMicroTime(m.cfg.Clock.Now())
	var err error
	if written != nil {
		lease := written.DeepCopy()
		m.stamp(lease, now, st)
		written, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		if apierrors.IsNotFound(err) {
			written = nil // deleted meanwhile (collected while this replica was cut off): create it again
		} else if apierrors.IsConflict(err) {
			written, err = leases.Get(ctx, m.name, metav1.GetOptions{})
			if err == nil {
				lease := written.DeepCopy()
				m.stamp(lease, now, st)
				written, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: controller.FieldManager})
			}
		}
	}
	if written == nil && err == nil || apierrors.IsNotFound(err) {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.cfg.Namespace}}
		m.stamp(lease, now, st)
		written, err = leases.Create(ctx, lease, metav1.CreateOptions{FieldManager: controller.FieldManager})
		if apierrors.IsAlreadyExists(err) { // a previous run of this identity: take it over
			if written, err = leases.Get(ctx, m.name, metav1.GetOptions{}); err == nil {
				lease := written.DeepCopy()
				m.stamp(lease, now, st)
				written, err = leases.Update(ctx, lease, metav1.UpdateOptions{FieldManager: controller.FieldManager})
			}
		}
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written, m.renewed, m.writtenGen = written, m.cfg.Clock.Now(), gen
	return nil
}

// stated is what a member Lease says of its replica's units.
type stated struct{ offered, holding, warm []string }

func (m *Members) stamp(lease *coordinationv1.Lease, now metav1.MicroTime, st stated) {
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	for k, v := range m.cfg.Labels {
		lease.Labels[k] = v
	}
	lease.Labels[GroupLabel] = GroupLabelValue(m.cfg.Group)
	lease.Labels[controller.ManagedByLabel] = controller.ManagedByValue
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[UnitsAnnotation] = strings.Join(st.offered, ",")
	lease.Annotations[HoldingAnnotation] = strings.Join(st.holding, ",")
	lease.Annotations[WarmAnnotation] = strings.Join(st.warm, ",")
	lease.Spec.HolderIdentity = ptr.To(m.cfg.Identity)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32((m.cfg.LeaseDuration + time.Second - 1) / time.Second))
	lease.Spec.RenewTime = &now
	if lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &now
	}
}

// observe records a member Lease; a new resourceVersion is a sign of life.
func (m *Members) observe(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name == m.name {
		return
	}
	for k, v := range m.cfg.Labels {
		if got := lease.Labels[k]; got != "" && got != v {
			m.forget(lease) // another layout's replica (and if it was not, it is now)
			return
		}
	}
	m.mu.Lock()
	s := m.seen[lease.Name]
	warmChanged := false
	if s == nil || s.resourceVersion != lease.ResourceVersion {
		holding, statesHolding := lease.Annotations[HoldingAnnotation]
		units, warm, statesWarm := Stated(lease)
		next := &sighting{
			identity:        ptr.Deref(lease.Spec.HolderIdentity, ""),
			units:           units,
			holding:         splitUnits(holding),
			statesHolding:   statesHolding,
			warm:            warm,
			statesWarm:      statesWarm,
			resourceVersion: lease.ResourceVersion,
			changed:         m.cfg.Clock.Now(),
		}
		warmChanged = s != nil && !slices.Equal(s.warm, next.warm)
		m.seen[lease.Name] = next
	}
	m.mu.Unlock()
	if !m.judge() && warmChanged {
		m.changes.Notify() // a holder waits for its unit's assignee to be warm
	}
}

// forget drops a member whose Lease was deleted: it left.
func (m *Members) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	m.mu.Lock()
	delete(m.seen, lease.Name)
	m.mu.Unlock()
	m.judge()
}

// Stated reads what a member Lease states: the units its replica offers,
// those it has warm, and whether it states warm units at all (versions
// before warm moves do not).
func Stated(lease *coordinationv1.Lease) (offered, warm []string, statesWarm bool) {
	w, statesWarm := lease.Annotations[WarmAnnotation]
	return splitUnits(lease.Annotations[UnitsAnnotation]), splitUnits(w), statesWarm
}

func splitUnits(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// judge recomputes the live members and the assignment, and tells the
// subscribers, and reports, if the assignment changed.
func (m *Members) judge() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	offers := map[string][]string{}  // identity → units
	holding := map[string][]string{} // identity → units held
	allStateHolding := true
	for _, s := range m.seen {
		if s.identity != "" && now.Sub(s.changed) < m.cfg.LeaseDuration {
			offers[s.identity] = s.units
			holding[s.identity] = s.holding
			allStateHolding = allStateHolding && s.statesHolding
		}
	}
	if !m.leaving && !m.renewed.IsZero() && now.Sub(m.renewed) < m.cfg.LeaseDuration {
		// As written, which is what the others judge by.
		offers[m.cfg.Identity] = splitUnits(m.written.Annotations[UnitsAnnotation])
		holding[m.cfg.Identity] = splitUnits(m.written.Annotations[HoldingAnnotation])
	}
	if !allStateHolding {
		holding = nil // a replica of an earlier version assigns without them
	}
	live := make([]string, 0, len(offers))
	for id := range offers {
		live = append(live, id)
	}
	slices.Sort(live)
	assigned := assignOffers(offers, holding)
	changed := !slices.Equal(live, m.live) || len(assigned) != len(m.assigned)
	for u, id := range assigned {
		changed = changed || m.assigned[u] != id
	}
	if !changed {
		return false
	}
	m.live, m.assigned = live, assigned
	mine := 0
	for _, id := range assigned {
		if id == m.cfg.Identity {
			mine++
		}
	}
	membersGauge.WithLabelValues(m.cfg.Group).Set(float64(len(live)))
	assignedGauge.WithLabelValues(m.cfg.Group).Set(float64(mine))
	m.changes.Notify()
	return true
}

// assignOffers assigns each unit among the members that run it: the units
// with the same candidates are assigned together, evenly, each member
// keeping what it holds (AssignKeeping).
func assignOffers(offers, holding map[string][]string) map[string]string {
	candidates := map[string][]string{} // unit → members that run it
	for id, units := range offers {
		for _, u := range units {
			candidates[u] = append(candidates[u], id)
		}
	}
	groups := map[string][]string{} // candidate set → its units
	sets := map[string][]string{}
	for u, ids := range candidates {
		slices.Sort(ids)
		key := strings.Join(ids, "\x00")
		groups[key] = append(groups[key], u)
		sets[key] = ids
	}
	out := map[string]string{}
	for key, units := range groups {
		for u, id := range AssignKeeping(units, sets[key], holding) {
			out[u] = id
		}
	}
	return out
}

// collect deletes member Leases this replica has not seen change for a
// lease duration: replicas killed without leaving, already gone from the
// assignment. Any replica may; the precondition makes a Lease renewed
// meanwhile stay (a replica cut off that comes back creates its Lease
// again). Until it is deleted, a replica that starts counts such a member
// live for a lease duration from its first sight of it, and a replica of
// another Lease layout waits for it (pkg/layout).
func (m *Members) collect(ctx context.Context, store cache.Store) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	var stale []string
	for name, s := range m.seen {
		if now.Sub(s.changed) >= m.cfg.LeaseDuration {
			stale = append(stale, name)
		}
	}
	m.mu.Unlock()
	for _, name := range stale {
		obj, ok, _ := store.GetByKey(m.cfg.Namespace + "/" + name)
		if !ok {
			continue
		}
		lease := obj.(*coordinationv1.Lease)
		err := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.FromContext(ctx).V(2).Info("Cannot delete the Lease of a member gone for long", "lease", name, "err", err)
		}
	}
}
