// Package controller is the thin framework shared by every controller of this
// manager: a named typed workqueue, the worker loop that drains it, event
// handlers that feed it, a channel source for generic events, the Base every
// controller embeds, one generic child adapter that reads children from the
// cache and writes them with server-side apply, and a consistency store that
// holds a reconcile back until the informers have observed the previous
// one's writes. It sits directly on
// client-go; a reader who knows kubernetes/sample-controller should
// recognise every piece.
package controller

import (
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Key identifies the object a reconcile is about: namespace (empty for
// cluster-scoped objects) and name.
type Key = cache.ObjectName

// Queue is the typed rate-limited workqueue every controller owns.
type Queue = workqueue.TypedRateLimitingInterface[Key]

// NewQueue returns a rate-limited queue with client-go's default controller
// rate limiter (per-item exponential backoff plus an overall token bucket).
// The name labels the workqueue_* metrics, so it must be unique per manager.
func NewQueue(name string) Queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[Key](),
		workqueue.TypedRateLimitingQueueConfig[Key]{Name: name},
	)
}
