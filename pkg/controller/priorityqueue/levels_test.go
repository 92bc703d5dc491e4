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

package priorityqueue

import (
	"fmt"
	"runtime"
	"testing"
)

// TestDrainedQueueShrinks: once a burst of keys (a convergence of every
// object) has drained, the queue holds no memory for them.
func TestDrainedQueueShrinks(t *testing.T) {
	const n = 50000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/key-%06d", i)
	}
	l := newLevels[string](nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, k := range keys {
		l.request(k, Priority(i%int(numPriorities)))
		l.Push(k)
	}
	for range n {
		l.Pop()
	}
	if got := l.Len(); got != 0 {
		t.Fatalf("%d keys left after the drain", got)
	}
	l.request("ns/next", High)
	l.Push("ns/next")
	if got := l.Pop(); got != "ns/next" {
		t.Fatalf("Pop after the drain = %q", got)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(l)
	runtime.KeepAlive(keys)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d bytes retained after a burst of %d keys drained", retained, n)
	if retained > 64<<10 {
		t.Errorf("the drained queue retains %d bytes", retained)
	}
}
