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

// TrySend offers key to a generic-event channel without blocking: when the
// channel is full the event is dropped, because one already waiting will
// trigger the same level-triggered reconcile. It reports whether key was sent.
func TrySend(ch chan<- Key, key Key) bool {
	select {
	case ch <- key:
		return true
	default:
		return false
	}
}

// ForwardEvents feeds keys from a generic-event channel into q until ctx is
// done or ch is closed. It is the source for controllers driven by something
// other than a watch, such as a ticker.
func ForwardEvents(ctx context.Context, ch <-chan Key, q Queue) {
	for {
		select {
		case <-ctx.Done():
			return
		case key, ok := <-ch:
			if !ok {
				return
			}
			q.Add(key)
		}
	}
}
