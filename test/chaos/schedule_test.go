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

package chaos

import (
	"testing"
	"time"
)

// TestScheduleReplays: the same seed gives the same schedule, another seed
// another one, and every kind occurs at least once even when the duration
// is short.
func TestScheduleReplays(t *testing.T) {
	a := schedule(42, time.Minute, 7*time.Second, nil)
	b := schedule(42, time.Minute, 7*time.Second, nil)
	c := schedule(43, time.Minute, 7*time.Second, nil)
	if describeSchedule(a) != describeSchedule(b) {
		t.Errorf("seed 42 gave two schedules:\n%s\n%s", describeSchedule(a), describeSchedule(b))
	}
	if describeSchedule(a) == describeSchedule(c) {
		t.Errorf("seeds 42 and 43 gave the same schedule")
	}
	seen := map[faultKind]bool{}
	for i, s := range a {
		seen[s.kind] = true
		if i > 0 && s.at <= a[i-1].at {
			t.Errorf("step %d at %v is not after step %d at %v", i, s.at, i-1, a[i-1].at)
		}
	}
	if len(seen) != int(numFaultKinds) {
		t.Errorf("%d kinds scheduled, want all %d:\n%s", len(seen), numFaultKinds, describeSchedule(a))
	}
}
