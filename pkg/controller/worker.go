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

package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

const (
	// DefaultMaxRetries is how many consecutive failures a key gets before it
	// is dropped until the next event for it, as in kube-controller-manager.
	DefaultMaxRetries = 15
	// DefaultReconcileTimeout bounds one reconcile.
	DefaultReconcileTimeout = time.Minute
)

// Result tells the worker what to do with a key after a reconcile that
// returned no error.
type Result struct {
	// RequeueAfter, when positive, reconciles the key again after this delay.
	RequeueAfter time.Duration
}

// ReconcileFunc brings the world in line with the object named by key. It
// reads from listers, writes to the API server and is idempotent.
type ReconcileFunc func(ctx context.Context, key Key) (Result, error)

// GiveUpFunc is told when a key is dropped after MaxRetries failures, so the
// controller can record a Warning event on the object.
type GiveUpFunc func(ctx context.Context, key Key, err error)

// Worker drains a controller's queue with a pool of goroutines.
type Worker struct {
	// Name is the controller's name, used in logs and metrics.
	Name string
	// Queue is the controller's named queue; Run shuts it down.
	Queue Queue
	// Reconcile is called for every key popped from Queue.
	Reconcile ReconcileFunc
	// MaxRetries defaults to DefaultMaxRetries.
	MaxRetries int
	// Timeout bounds one reconcile; defaults to DefaultReconcileTimeout.
	Timeout time.Duration
	// OnGiveUp is optional.
	OnGiveUp GiveUpFunc
}

// Run starts workers goroutines and blocks until they have stopped.
//
// Cancelling ctx stops everything at once: the reconciles in flight run on
// contexts derived from ctx, so they are cancelled with it (the Lease is
// lost: nothing more may be written). When ctx carries a graceful stop
// signal (WithGracefulStop), closing it makes the workers stop taking keys
// while the reconciles in flight finish on ctx; Run returns once they have.
func (w *Worker) Run(ctx context.Context, workers int) {
	RegisterMetrics()
	initMetrics(w.Name)
	logger := klog.FromContext(ctx).WithValues("controller", w.Name)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting workers", "count", workers)

	// The first reconcile is logged with its delay: how long a takeover
	// or a moved unit waited for its caches and its queue (the benchmark
	// reads it).
	started, first := time.Now(), &sync.Once{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w.processNextItem(ctx, func() {
				first.Do(func() { logger.Info("First reconcile", "afterWorkersStarted", time.Since(started)) })
			}) {
			}
		})
	}
	select {
	case <-ctx.Done():
		logger.Info("Stopping workers now, cancelling reconciles in flight")
	case <-GracefulStop(ctx):
		logger.Info("Stopping workers, waiting for reconciles in flight")
	}
	w.Queue.ShutDown()
	wg.Wait()
	logger.Info("All workers stopped")
}

// processNextItem handles one key, calling starting before its reconcile,
// and reports whether the worker should go on.
func (w *Worker) processNextItem(ctx context.Context, starting func()) bool {
	key, shutdown := w.Queue.Get()
	if shutdown {
		return false
	}
	defer w.Queue.Done(key)
	if w.stopping(ctx) {
		// Leave queued work to whoever leads next.
		return false
	}

	logger := klog.FromContext(ctx).WithValues("key", key.String())
	rctx, cancel := context.WithTimeout(ctx, w.timeout())
	defer cancel()
	rctx = klog.NewContext(rctx, logger)

	starting()
	activeWorkers.WithLabelValues(w.Name).Inc()
	start := time.Now()
	result, err, panicked := w.reconcile(rctx, key)
	reconcileDuration.WithLabelValues(w.Name).Observe(time.Since(start).Seconds())
	activeWorkers.WithLabelValues(w.Name).Dec()

	switch {
	case panicked:
		reconcileTotal.WithLabelValues(w.Name, resultPanic).Inc()
		reconcilePanics.WithLabelValues(w.Name).Inc()
		reconcileErrors.WithLabelValues(w.Name).Inc()
		w.retry(rctx, key, err)
	case IsTransient(err):
		// Keeps the rate limiter's history, unlike a RequeueAfter: a key
		// that fails, then waits, then fails again still backs off and
		// still reaches MaxRetries.
		reconcileTotal.WithLabelValues(w.Name, resultRequeue).Inc()
		w.retry(rctx, key, err)
	case err != nil:
		reconcileTotal.WithLabelValues(w.Name, resultError).Inc()
		reconcileErrors.WithLabelValues(w.Name).Inc()
		w.retry(rctx, key, err)
	case result.RequeueAfter > 0:
		reconcileTotal.WithLabelValues(w.Name, resultRequeue).Inc()
		w.Queue.Forget(key)
		w.Queue.AddAfter(key, result.RequeueAfter)
	default:
		reconcileTotal.WithLabelValues(w.Name, resultSuccess).Inc()
		w.Queue.Forget(key)
	}
	return true
}

// reconcile calls Reconcile, turning a panic into an error so that one
// surprising object cannot take the whole manager down.
func (w *Worker) reconcile(ctx context.Context, key Key) (result Result, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			err = fmt.Errorf("reconcile panicked: %v", r)
			klog.FromContext(ctx).Error(err, "Recovered from panic", "stack", string(debug.Stack()))
		}
	}()
	result, err = w.Reconcile(ctx, key)
	return result, err, false
}

// retry requeues key with backoff, or drops it once it has failed MaxRetries times.
func (w *Worker) retry(ctx context.Context, key Key, err error) {
	logger := klog.FromContext(ctx)
	retries := w.Queue.NumRequeues(key)
	if retries < w.maxRetries() {
		if IsTransient(err) {
			logger.V(2).Info("Requeueing", "reason", err.Error(), "retries", retries)
		} else {
			// Every failure is visible at the default level, rate-limited
			// by client-go's error handler.
			utilruntime.HandleErrorWithContext(ctx, err, "Reconcile failed, will retry", "retries", retries)
		}
		w.Queue.AddRateLimited(key)
		return
	}
	logger.Error(err, "Reconcile failed too many times, dropping the key until its next change", "retries", retries)
	reconcileDropped.WithLabelValues(w.Name).Inc()
	w.Queue.Forget(key)
	if w.OnGiveUp != nil {
		w.OnGiveUp(ctx, key, err)
	}
}

// stopping reports whether the worker must take no more keys: ctx is done
// or a graceful stop has begun.
func (w *Worker) stopping(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-GracefulStop(ctx):
		return true
	default:
		return false
	}
}

func (w *Worker) maxRetries() int {
	if w.MaxRetries > 0 {
		return w.MaxRetries
	}
	return DefaultMaxRetries
}

func (w *Worker) timeout() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout
	}
	return DefaultReconcileTimeout
}
