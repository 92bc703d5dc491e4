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

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// A handover is timed by the managers' own clocks (one machine's): the
// Lease's release record carries the holder's renewTime at release, and the
// receiver logs its first reconcile ("First reconcile", pkg/controller).
// Polling the replicas would add the poll period to every figure.

// leaseHistory records every version of the Leases of a namespace that a
// watch delivers.
type leaseHistory struct {
	mu       sync.Mutex
	versions map[string][]leaseVersion
	writes   int // updates and creates seen
}

type leaseVersion struct {
	holder         string
	renew, acquire time.Time
}

// watchLeaseHistory starts recording the Leases of namespace until ctx ends.
func watchLeaseHistory(ctx context.Context, c *cluster, namespace string) (*leaseHistory, error) {
	h := &leaseHistory{versions: map[string][]leaseVersion{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(namespace))
	informer := factory.Coordination().V1().Leases().Informer()
	record := func(obj any) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		v := leaseVersion{holder: holder(l)}
		if l.Spec.RenewTime != nil {
			v.renew = l.Spec.RenewTime.Time
		}
		if l.Spec.AcquireTime != nil {
			v.acquire = l.Spec.AcquireTime.Time
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.versions[l.Name] = append(h.versions[l.Name], v)
		h.writes++
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the Lease watch of %s did not sync", namespace)
		}
	}
	return h, nil
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// released is when the Lease name was last released at or after since, by
// its holder's clock (client-go writes renewTime with the release); zero if
// it was not.
func (h *leaseHistory) released(name string, since time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	var at time.Time
	for _, v := range h.versions[name] {
		if v.holder == "" && !v.renew.Before(since) {
			at = v.renew
		}
	}
	return at
}

// writeCount is how many Lease writes the watch has seen.
func (h *leaseHistory) writeCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes
}

// holderChanges counts, over every Lease, the versions written at or
// after since whose holder differs from the version before.
func (h *leaseHistory) holderChanges(since time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, vs := range h.versions {
		for i := 1; i < len(vs); i++ {
			if vs[i].holder != vs[i-1].holder && !vs[i].renew.Before(since) {
				n++
			}
		}
	}
	return n
}

// firstReconciles maps each unit to the first "First reconcile" the log at
// path states for it at or after since.
func firstReconciles(path string, since time.Time) (map[string]time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"First reconcile"`) {
			continue
		}
		at, ok := klogTime(line, since)
		unit := klogValue(line, "controller")
		if !ok || unit == "" || at.Before(since) {
			continue
		}
		if _, seen := out[unit]; !seen {
			out[unit] = at
		}
	}
	return out, sc.Err()
}

// klogTime parses the header of a klog text line, "I1129 18:22:22.212972 …",
// in the local time zone, in the year of near (klog omits it).
func klogTime(line string, near time.Time) (time.Time, bool) {
	if len(line) < 21 {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return t.AddDate(near.Year(), 0, 0), true
}

// klogValue is the quoted value of key in a klog text line, or "".
func klogValue(line, key string) string {
	_, rest, ok := strings.Cut(line, " "+key+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// handoverTimes returns, for each unit of moved (unit → its receiver's
// log), the time from its start point (from(unit); zero: skipped) to its
// first reconcile on the receiver at or after since, sorted; missing are
// the units with no first reconcile there.
func handoverTimes(moved map[string]string, since time.Time, from func(unit string) time.Time) (times []time.Duration, missing []string, err error) {
	logs := map[string]map[string]time.Time{}
	for unit, log := range moved {
		if logs[log] == nil {
			if logs[log], err = firstReconciles(log, since); err != nil {
				return nil, nil, err
			}
		}
		start := from(unit)
		first, ok := logs[log][unit]
		if start.IsZero() || !ok {
			missing = append(missing, unit)
			continue
		}
		times = append(times, first.Sub(start))
	}
	slices.Sort(times)
	slices.Sort(missing)
	return times, missing, nil
}

// spanOf is "12 ms to 310 ms (3 units)", or "—".
func spanOf(times []time.Duration, missing []string) string {
	if len(times) == 0 && len(missing) == 0 {
		return "no unit moved"
	}
	s := "—"
	if len(times) > 0 {
		s = fmt.Sprintf("%s to %s (%d units)", millis(times[0]), millis(times[len(times)-1]), len(times))
	}
	if len(missing) > 0 {
		s += fmt.Sprintf("; no first reconcile logged for %s", strings.Join(missing, ", "))
	}
	return s
}

func millis(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
