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
