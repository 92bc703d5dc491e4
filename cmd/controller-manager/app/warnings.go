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
