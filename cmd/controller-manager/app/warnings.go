package app

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// onceWarnings logs each distinct warning of the API server once. The
// controllers read and write v1beta1, the storage version, which is
// deprecated for users: the default handler would log the same deprecation
// line for every request.
type onceWarnings struct {
	seen sync.Map
}

func (w *onceWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	if _, dup := w.seen.LoadOrStore(text, struct{}{}); dup {
		return
	}
	klog.FromContext(ctx).Info("The API server warned; further identical warnings are not logged", "warning", text)
}
