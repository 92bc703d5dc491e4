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

package cleanup

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Ticks arriving every millisecond during 100 ms sweeps must coalesce: at
// most one sweep waits while another runs.
func TestTicksDuringASweepCoalesce(t *testing.T) {
	// The worker runs here without Base.Run, so the queue is the plain one:
	// NewBase's queue holds keys back until Base.Run starts it.
	c := &Controller{
		Base: controller.Base{ControllerName: "test-cleanup-coalesce", Workers: 1,
			Queue: controller.NewQueueOfKind("test-cleanup-coalesce", controller.PriorityQueue)},
		opts:  Options{Interval: time.Millisecond},
		ticks: make(chan controller.Key, 1),
	}
	var sweeps, running, overlapped atomic.Int32
	sweepTime := 100 * time.Millisecond
	w := controller.Worker{Name: "test-cleanup", Queue: c.Queue, Reconcile: func(context.Context, controller.Key) (controller.Result, error) {
		if running.Add(1) > 1 {
			overlapped.Add(1)
		}
		sweeps.Add(1)
		time.Sleep(sweepTime) // the sweep's own duration, not a wait for a condition
		running.Add(-1)
		return controller.Result{}, nil
	}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go controller.ForwardEvents(ctx, c.ticks, c.Queue)
	go c.runTicker(ctx)
	done := make(chan struct{})
	go func() { w.Run(ctx, 1); close(done) }()

	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return sweeps.Load() >= 5, nil
	}); err != nil {
		t.Fatal("sweeps did not run")
	}
	elapsed := time.Since(start)
	cancel()
	<-done

	// ~100 ticks per sweep arrived; without coalescing there would be a
	// backlog of hundreds. With it, sweeps run back to back: the number of
	// sweeps is bounded by the time spent.
	if max := int32(elapsed/sweepTime) + 2; sweeps.Load() > max {
		t.Errorf("%d sweeps in %s: ticks piled up (max %d)", sweeps.Load(), elapsed, max)
	}
	if c.Queue.Len() > 1 {
		t.Errorf("queue holds %d keys, want at most 1", c.Queue.Len())
	}
	if overlapped.Load() != 0 {
		t.Error("sweeps overlapped")
	}
}
