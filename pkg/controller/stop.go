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

import "context"

// gracefulStopKey carries the graceful stop signal in a context.
type gracefulStopKey struct{}

// WithGracefulStop returns a copy of ctx whose workers stop taking keys once
// stop is closed and let the reconciles in flight finish on ctx.
//
// The two signals mean different things. Cancelling ctx means "stop now":
// the Lease is gone, so every reconcile in flight is cancelled at once and
// nothing more may be written. Closing stop means "drain": a graceful
// SIGTERM while the Lease is still held, which is released only after the
// drain, so the reconciles in flight may finish their writes.
func WithGracefulStop(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, gracefulStopKey{}, stop)
}

// GracefulStop returns the channel set by WithGracefulStop; nil (never
// closed) when there is none. A controller whose Run does not drain a
// Worker returns once it is closed, or its unit is handed over only at
// the shutdown timeout.
func GracefulStop(ctx context.Context) <-chan struct{} {
	stop, _ := ctx.Value(gracefulStopKey{}).(<-chan struct{})
	return stop
}
