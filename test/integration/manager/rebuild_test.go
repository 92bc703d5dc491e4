package manager

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// In per-controller mode a controller that lost its Lease is rebuilt on the
// running informers and competes again. Every real controller must survive
// that and work afterwards: the Pipeline controller's
// rebuild used to fail on its informer's indexes ("indexer conflict"), so
// the replica never led it again.
func TestPerControllerRebuildsEveryControllerAfterLosingItsLease(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, cp.Client)
	controllers := []string{"app", "pipeline", "ingress"}
	m := framework.StartManager(t, cp.Config, func(o *options.Options) {
		shortLease(ns, "rebuild")(o)
		o.Generic.Controllers = controllers
		o.HA.PerController = true
		o.Generic.ShutdownTimeout = 10 * time.Second
	})
	allLed := func(context.Context) (bool, error) {
		led := controllersLed(t, m)
		for _, c := range controllers {
			if !led[c] {
				return false, nil
			}
		}
		return true, nil
	}
	framework.Eventually(t, 60*time.Second, "the replica to lead every controller", allLed)

	for _, c := range controllers {
		// Longer than the renew deadline, so that the replica loses the
		// Lease, and short enough for it to win it back soon after.
		stealLeaseFor(t, ns, "rebuild-"+c, 5*time.Second)
		framework.Eventually(t, 15*time.Second, c+" to stop after its Lease was taken", func(context.Context) (bool, error) {
			return !controllersLed(t, m)[c], nil
		})
		framework.Eventually(t, 30*time.Second, c+" to be rebuilt and led again", func(context.Context) (bool, error) {
			return controllersLed(t, m)[c], nil
		})
	}
	select {
	case <-m.Done():
		t.Fatalf("the manager stopped: %v", m.Err())
	default:
	}

	// The rebuilt Ingress controller works.
	if _, err := cp.Client.CoreV1().Services(ns).Create(ctx, annotatedService(ns, "after-rebuilds"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the rebuilt Ingress controller to create the Ingress", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.NetworkingV1().Ingresses(ns).Get(ctx, "after-rebuilds", metav1.GetOptions{})
		return err == nil, nil
	})
}
