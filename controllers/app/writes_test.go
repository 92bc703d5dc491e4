package app

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller"
)

func service(name, uid, rv string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(uid), ResourceVersion: rv}}
}

func TestWriteTracker(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(service("other", "u0", "10")); err != nil {
		t.Fatal(err)
	}
	if store.LastStoreSyncResourceVersion() == "" {
		// The controller would then act on caches older than its own writes.
		t.Fatal("the client's AtomicFIFO feature is off: stores keep no resource version")
	}
	w := newWriteTracker(map[schema.GroupResource]cache.Store{servicesResource: store}, time.Minute)
	now := time.Unix(1000, 0)
	w.now = func() time.Time { return now }
	app := controller.Key{Namespace: "shop", Name: "web"}

	if d := w.wait(app); d != 0 {
		t.Fatalf("an App without writes waits %s", d)
	}

	// A create at resourceVersion 12 is observed once the store reaches 12,
	// whichever object brought it there.
	w.wrote(app, "app-uid", servicesResource, "12")
	if d := w.wait(app); d != time.Minute {
		t.Fatalf("unobserved write: wait = %s, want the full timeout", d)
	}
	_ = store.Add(service("web", "u1", "11"))
	if w.wait(app) == 0 {
		t.Fatal("store at 11 counted as having observed a write at 12")
	}
	_ = store.Update(service("other", "u0", "12"))
	if d := w.wait(app); d != 0 {
		t.Fatalf("store at 12: wait = %s, want 0", d)
	}

	// A delete is observed once the store no longer holds that object.
	w.deleted(app, "app-uid", servicesResource, "shop/web", "u1")
	if w.wait(app) == 0 {
		t.Fatal("delete counted as observed while the store still holds the object")
	}
	_ = store.Delete(service("web", "u1", "13"))
	_ = store.Add(service("web", "u2", "14")) // a new object of the same name is another object
	if d := w.wait(app); d != 0 {
		t.Fatalf("deleted object gone from the store: wait = %s, want 0", d)
	}

	// Writes never observed stop holding the App back after the timeout.
	w.wrote(app, "app-uid", servicesResource, "99")
	now = now.Add(40 * time.Second)
	if d := w.wait(app); d != 20*time.Second {
		t.Fatalf("wait = %s, want the 20s left", d)
	}
	now = now.Add(21 * time.Second)
	if d := w.wait(app); d != 0 {
		t.Fatalf("expired write: wait = %s, want 0", d)
	}

	// A new App of the same name does not inherit the old one's writes, and
	// forget drops the record.
	w.wrote(app, "old-uid", servicesResource, "99")
	w.wrote(app, "new-uid", servicesResource, "5")
	if d := w.wait(app); d != 0 {
		t.Fatalf("new App waits for its predecessor's write: %s", d)
	}
	w.wrote(app, "new-uid", servicesResource, "99")
	w.forget(app)
	if d := w.wait(app); d != 0 {
		t.Fatalf("forgotten App still waits %s", d)
	}
}
