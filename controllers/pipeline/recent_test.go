package pipeline

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func svcAt(uid types.UID, rv string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: uid, ResourceVersion: rv}}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestRecentWrites(t *testing.T) {
	get := func(r *recentWrites, cached *corev1.Service) metav1.Object {
		var obj metav1.Object
		if cached != nil {
			obj = cached
		}
		return r.latest(kindService, "ns", "s", obj)
	}
	rvOf := func(o metav1.Object) string {
		if o == nil {
			return "<none>"
		}
		return o.GetResourceVersion()
	}
	cases := []struct {
		name   string
		write  func(r *recentWrites)
		cached *corev1.Service
		after  time.Duration
		want   string // resourceVersion of what latest returns
	}{
		{name: "nothing written", cached: svcAt("a", "5"), want: "5"},
		{name: "created, cache behind", write: func(r *recentWrites) { r.wrote(kindService, svcAt("a", "7")) }, want: "7"},
		{name: "updated, cache older", write: func(r *recentWrites) { r.wrote(kindService, svcAt("a", "7")) }, cached: svcAt("a", "5"), want: "7"},
		{name: "updated, cache caught up", write: func(r *recentWrites) { r.wrote(kindService, svcAt("a", "7")) }, cached: svcAt("a", "7"), want: "7"},
		{name: "updated, cache newer", write: func(r *recentWrites) { r.wrote(kindService, svcAt("a", "7")) }, cached: svcAt("a", "10"), want: "10"},
		{name: "deleted, cache behind", write: func(r *recentWrites) { r.deleted(kindService, svcAt("a", "7")) }, cached: svcAt("a", "7"), want: "<none>"},
		{name: "deleted, recreated by someone", write: func(r *recentWrites) { r.deleted(kindService, svcAt("a", "7")) }, cached: svcAt("b", "9"), want: "9"},
		{name: "created, then deleted by someone", write: func(r *recentWrites) {
			r.wrote(kindService, svcAt("a", "7"))
			r.observeDelete(kindService, cache.DeletedFinalStateUnknown{Obj: svcAt("a", "8")})
		}, want: "<none>"},
		{name: "expired", write: func(r *recentWrites) { r.wrote(kindService, svcAt("a", "7")) }, after: time.Minute, want: "<none>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			r := newRecentWrites(clock.now)
			if tc.write != nil {
				tc.write(r)
			}
			clock.t = clock.t.Add(tc.after)
			if got := rvOf(get(r, tc.cached)); got != tc.want {
				t.Errorf("latest = %s, want %s", got, tc.want)
			}
		})
	}

	// Once the cache has caught up the entry is gone: a later delete seen
	// by the cache is not masked.
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := newRecentWrites(clock.now)
	r.wrote(kindService, svcAt("a", "7"))
	get(r, svcAt("a", "7"))
	if got := get(r, nil); got != nil {
		t.Errorf("after catching up, a missing object reads as %v", got)
	}
	if len(r.entries) != 0 {
		t.Errorf("entries left: %v", r.entries)
	}
	// Writes sweep expired entries of objects nobody reads again.
	r.deleted(kindService, svcAt("a", "7"))
	clock.t = clock.t.Add(time.Minute)
	r.wrote(kindDeployment, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "other", ResourceVersion: "1"}})
	if len(r.entries) != 1 {
		t.Errorf("expired entries not swept: %v", r.entries)
	}
}
