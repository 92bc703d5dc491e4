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

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// rolloutNamespace holds the Apps the rollout's clients create.
const rolloutNamespace = "chaos-rollout"

// The rollout's clients: an App created every createEvery (admission
// webhooks on the write path) and, by each of listers readers, the
// namespace's Apps listed as apps v1 every listEvery (the conversion
// webhook on the read path): at least 10 requests a second in all on a
// quiet machine, as the kind rollout test sends.
const (
	createEvery = time.Second
	listers     = 2
	listEvery   = 100 * time.Millisecond
	// replacedReadyTimeout bounds how long a replaced replica's successor
	// may take to serve and pass its readiness probe.
	replacedReadyTimeout = 90 * time.Second
)

var appsV1 = schema.GroupVersionResource{Group: appv1beta1.GroupName, Version: "v1", Resource: "apps"}

// clientCounts are the rollout clients' requests and failures.
type clientCounts struct {
	creates, lists int
	failures       []string
}

// rollout replaces every replica in turn, as a Deployment's rolling update
// does: SIGTERM (the lame duck serves on for --shutdown-delay-duration while
// the endpoints drop it), the slot started again, and the next one only once
// the new process is an endpoint. Meanwhile clients create Apps and read
// them as v1; every one of their requests must succeed.
//
// With layouts, one such pass per layout, each starting the successors
// with that Lease layout's flags and ending once it leads (changeLayout).
func (x *runner) rollout(ctx context.Context, layouts ...leaseLayout) error {
	if err := x.ensureNamespace(ctx, rolloutNamespace); err != nil {
		return err
	}
	clientCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	counts := &clientCounts{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	if err := x.rolloutClients(clientCtx, &wg, &mu, counts); err != nil {
		return err
	}
	begin := time.Now()
	var replaced []string
	passes := []*leaseLayout{nil}
	if len(layouts) > 0 {
		passes = nil
		for _, l := range layouts {
			passes = append(passes, &l)
		}
	}
	for _, to := range passes {
		for slot := range x.sup.processes() {
			if to != nil {
				x.sup.setArgs(slot, to.withArgs(x.sup.slotArgs(slot)))
			}
			old := x.sup.processes()[slot]
			if old == nil || old.Exited() {
				continue
			}
			next, sent, err := x.replace(ctx, slot, old)
			if err != nil {
				return fmt.Errorf("rollout: %w", err)
			}
			replaced = append(replaced, fmt.Sprintf("%s (exited %v after SIGTERM) by %s (an endpoint %v after SIGTERM)", old.Name,
				old.ExitedAt().Sub(sent).Round(100*time.Millisecond), next.Name, time.Since(sent).Round(100*time.Millisecond)))
		}
		if to != nil {
			led, err := x.layoutLeads(ctx, *to)
			if err != nil {
				return fmt.Errorf("rollout to Lease layout %s: %w", to, err)
			}
			x.sup.setLayout(*to)
			replaced = append(replaced, fmt.Sprintf("Lease layout %s leading %v after its last replica started", to, led.Round(100*time.Millisecond)))
		}
	}
	// The last successor's first seconds as an endpoint count too.
	time.Sleep(probePeriod) // part of the scenario: traffic on the new set, not a wait for a condition
	stopClients()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	x.w.mu.Lock()
	x.w.rollouts = append(x.w.rollouts, *counts)
	x.w.mu.Unlock()
	x.w.logf("rollout in %v: %s; clients sent %d creates and %d v1 lists, %d failed", time.Since(begin).Round(100*time.Millisecond),
		strings.Join(replaced, ", "), counts.creates, counts.lists, len(counts.failures))
	return nil
}

// changeLayout rolls the replicas to the next Lease layout (config's
// next) and back, as rolling updates that change
// --leader-elect-per-controller or --shards do, with the rollout's clients
// running: replicas of two layouts run side by side twice each way.
func (x *runner) changeLayout(ctx context.Context) error {
	from := x.sup.layout()
	x.w.logf("change-layout: from %s to %s and back", from, from.next())
	return x.rollout(ctx, from.next(), from)
}

// layoutLeadsTimeout bounds how long after its last replica started a new
// layout may take to lead: the old one's last Lease released, or expired
// (a lease duration) if its holder was killed, and a retry period.
const layoutLeadsTimeout = 60 * time.Second

// layoutLeads waits until the group's fence states l (a manager before
// layouts writes none) and l's target Lease is held, and says how long
// that took.
func (x *runner) layoutLeads(ctx context.Context, l leaseLayout) (time.Duration, error) {
	begin := time.Now()
	leases := x.w.c.Kube.CoordinationV1().Leases(framework.ManagerNamespace)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, layoutLeadsTimeout, true, func(ctx context.Context) (bool, error) {
		fence, err := leases.Get(ctx, layout.FenceName(framework.LeaseName), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) || err == nil && fence.Labels[layout.Label] != l.String() {
			return false, nil
		}
		holder, err := leaseHolder(ctx, x.w.c, l.targetLease())
		return err == nil && holder != "" && !strings.HasPrefix(holder, "("), nil
	})
	return time.Since(begin), err
}

// replace sends old, the process of slot, SIGTERM and waits until its
// successor is an endpoint of the webhook Service; it returns the successor
// and when SIGTERM was sent.
func (x *runner) replace(ctx context.Context, slot int, old *framework.Process) (*framework.Process, time.Time, error) {
	sent := time.Now()
	if err := x.sup.terminate(old); err != nil {
		return nil, sent, err
	}
	var next *framework.Process
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, replacedReadyTimeout, true, func(ctx context.Context) (bool, error) {
		next = x.sup.processes()[slot]
		return next != old && next != nil && !next.Exited() && slices.Contains(x.svc.endpoints(), next.WebhookAddr), nil
	})
	if err != nil {
		return nil, sent, fmt.Errorf("%s's successor not an endpoint %v after SIGTERM: %w", old.Name, replacedReadyTimeout, err)
	}
	return next, sent, nil
}

// rolloutClients starts the creating and the reading client.
func (x *runner) rolloutClients(ctx context.Context, wg *sync.WaitGroup, mu *sync.Mutex, counts *clientCounts) error {
	cfg := rest.CopyConfig(x.w.c.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: every request goes out when due
	typed, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	x.w.mu.Lock()
	x.w.rolloutApps++
	round := x.w.rolloutApps
	x.w.mu.Unlock()
	record := func(what string, err error, lists bool) {
		mu.Lock()
		defer mu.Unlock()
		if lists {
			counts.lists++
		} else {
			counts.creates++
		}
		if err != nil && ctx.Err() == nil {
			counts.failures = append(counts.failures, fmt.Sprintf("%s %s: %v", time.Now().UTC().Format("15:04:05.000"), what, err))
		}
	}
	wg.Go(func() {
		i := 0
		_ = wait.PollUntilContextCancel(ctx, createEvery, true, func(ctx context.Context) (bool, error) {
			i++
			app := &appv1beta1.App{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ro-%d-%03d", round, i)},
				Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)}}
			_, err := typed.AppV1beta1().Apps(rolloutNamespace).Create(ctx, app, metav1.CreateOptions{})
			record("create App "+app.Name, err, false)
			return false, nil
		})
	})
	for range listers {
		wg.Go(func() {
			_ = wait.PollUntilContextCancel(ctx, listEvery, true, func(ctx context.Context) (bool, error) {
				_, err := dyn.Resource(appsV1).Namespace(rolloutNamespace).List(ctx, metav1.ListOptions{})
				record("list apps v1", err, true)
				return false, nil
			})
		})
	}
	return nil
}

// ensureNamespace creates ns unless it exists.
func (x *runner) ensureNamespace(ctx context.Context, ns string) error {
	return retrying(ctx, "creating namespace "+ns, func(ctx context.Context) error {
		_, err := x.w.c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}
