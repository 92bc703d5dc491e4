// Command appbench measures how fast the App controller converges new Apps,
// next to the raw write rate of the same API server measured in the same run.
//
// It starts a local control plane (pkg/testing/controlplane: etcd with fsync,
// kube-apiserver; no kube-controller-manager), installs the CRDs and warms the
// API server up. Then:
//
//   - raw: N times, with the given concurrency, plain client-go creates of the
//     four objects of an App: the App and the Deployment, Service and Ingress
//     the controller would create for it (controllers/app.DesiredChildren).
//     Raw Apps/s is creates/s ÷ 4.
//   - controller: the manager runs in this process with only the App
//     controller, its default workers and client-side rate limiting off;
//     N Apps (with Service and Ingress) are created with the same concurrency,
//     and the clock stops when every App's status reports its generation
//     without Degraded, that is once its children exist and its status is
//     written.
//
// It prints both rates, their ratio and the controller's writes per App.
//
//	go run ./test/bench/appbench -apps 1000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// ingressDomain gives the Apps' Ingresses a host, as in production.
const ingressDomain = "apps.example.com"

type config struct {
	apps        int
	warmup      int
	concurrency int
	binDir      string
	timeout     time.Duration
}

func main() {
	var cfg config
	flag.IntVar(&cfg.apps, "apps", 1000, "Apps to create, in both the raw and the controller measurement.")
	flag.IntVar(&cfg.warmup, "warmup", 500, "App sets (4 objects each) created and deleted before measuring: a cold API server is about half as fast.")
	flag.IntVar(&cfg.concurrency, "concurrency", appcontroller.DefaultOptions().Workers,
		"Concurrent creators in the raw measurement and of Apps in the controller measurement; the default is the controller's default --concurrent-app-syncs.")
	flag.StringVar(&cfg.binDir, "bin-dir", "", "Control plane binaries (default: $"+controlplane.BinDirEnv+", else hack/bin).")
	flag.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "Give up after this long.")
	klog.InitFlags(nil)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := run(ctx, cfg); err != nil {
		klog.ErrorS(err, "Benchmark failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	if cfg.apps < 1 || cfg.concurrency < 1 || cfg.warmup < 0 {
		return errors.New("-apps and -concurrency must be positive, -warmup not negative")
	}
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	cp, err := controlplane.Start(startCtx, controlplane.Options{Fsync: true, BinDir: cfg.binDir})
	cancel()
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}()
	if err := framework.InstallCRDs(ctx, cp.Config); err != nil {
		return err
	}

	kubeConfig, crdConfig := clientConfigs(cp.Config)
	c, err := newClients(kubeConfig, crdConfig)
	if err != nil {
		return err
	}
	// A CRD is served a moment after it is established.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.crd.AppV1beta1().Apps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("waiting for Apps to be served: %w", err)
	}
	fmt.Printf("control plane: etcd %s with fsync, kube-apiserver %s, no kube-controller-manager; %d Apps, concurrency %d, client rate limiting off\n",
		controlplane.EtcdVersion, controlplane.KubeVersion, cfg.apps, cfg.concurrency)

	if cfg.warmup > 0 {
		elapsed, err := c.rawCreates(ctx, "bench-warmup", cfg.warmup, cfg.concurrency)
		if err != nil {
			return fmt.Errorf("warming up: %w", err)
		}
		fmt.Printf("warm-up:     %d creates in %s (%.1f creates/s), then deleted\n",
			4*cfg.warmup, elapsed.Round(time.Millisecond), float64(4*cfg.warmup)/elapsed.Seconds())
		if err := c.deleteAll(ctx, "bench-warmup", cfg.warmup, cfg.concurrency); err != nil {
			return err
		}
	}

	rawElapsed, err := c.rawCreates(ctx, "bench-raw", cfg.apps, cfg.concurrency)
	if err != nil {
		return fmt.Errorf("measuring the raw write rate: %w", err)
	}
	rawCreates := float64(4*cfg.apps) / rawElapsed.Seconds()
	rawApps := rawCreates / 4
	fmt.Printf("raw:         %d creates in %s = %.1f creates/s = %.1f raw Apps/s\n",
		4*cfg.apps, rawElapsed.Round(time.Millisecond), rawCreates, rawApps)
	// The manager must not find the raw Apps: it would reconcile them too.
	if err := c.deleteAll(ctx, "bench-raw", cfg.apps, cfg.concurrency); err != nil {
		return err
	}

	result, err := c.controllerRun(ctx, kubeConfig, cfg)
	if err != nil {
		return fmt.Errorf("measuring the controller: %w", err)
	}
	apps := float64(cfg.apps) / result.elapsed.Seconds()
	fmt.Printf("controller:  %d Apps converged in %s = %.1f Apps/s\n", cfg.apps, result.elapsed.Round(time.Millisecond), apps)
	fmt.Printf("ratio:       %.1f%% of the raw rate (target: at least 50%%)\n", 100*apps/rawApps)
	fmt.Printf("writes:      %.2f per App (%s), plus %.2f event writes per App\n",
		float64(result.writes)/float64(cfg.apps), result.breakdown, float64(result.events)/float64(cfg.apps))
	return nil
}

// clientConfigs returns the configs of the benchmark's clients and of the
// manager, as the manager's flags would make them with --kube-api-qps=-1:
// protobuf for built-in types, JSON for custom resources, no client-side
// rate limiting.
func clientConfigs(admin *rest.Config) (kube, crd *rest.Config) {
	kube = rest.CopyConfig(admin)
	kube.QPS = -1
	kube.ContentType = "application/vnd.kubernetes.protobuf"
	kube.AcceptContentTypes = kube.ContentType + ",application/json"
	crd = rest.CopyConfig(kube)
	crd.ContentType = "application/json"
	crd.AcceptContentTypes = "application/json"
	return kube, crd
}

type clients struct {
	kube kubernetes.Interface
	crd  versioned.Interface
}

func newClients(kubeConfig, crdConfig *rest.Config) (*clients, error) {
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, err
	}
	crd, err := versioned.NewForConfig(crdConfig)
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, crd: crd}, nil
}

func newApp(i int) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i)},
		Spec: appv1beta1.AppSpec{
			Image:         "nginx:1.27",
			Replicas:      ptr.To[int32](1),
			EnableService: true,
			EnableIngress: true,
			Port:          80,
		},
	}
}

func (c *clients) createNamespace(ctx context.Context, name string) error {
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// parallel runs fn for 0..n-1 on concurrency goroutines and returns the
// first error.
func parallel(ctx context.Context, n, concurrency int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// rawCreates creates n App sets in namespace ns, each as four sequential
// creates, and returns how long it took.
func (c *clients) rawCreates(ctx context.Context, ns string, n, concurrency int) (time.Duration, error) {
	if err := c.createNamespace(ctx, ns); err != nil {
		return 0, err
	}
	opts := appcontroller.Options{IngressDomain: ingressDomain}
	create := metav1.CreateOptions{FieldManager: controller.FieldManager}
	start := time.Now()
	err := parallel(ctx, n, concurrency, func(ctx context.Context, i int) error {
		created, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, newApp(i), create)
		if err != nil {
			return fmt.Errorf("creating App: %w", err)
		}
		d, svc, ing, err := appcontroller.DesiredChildren(created, opts)
		if err != nil {
			return err
		}
		if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, d, create); err != nil {
			return fmt.Errorf("creating Deployment: %w", err)
		}
		if _, err := c.kube.CoreV1().Services(ns).Create(ctx, svc, create); err != nil {
			return fmt.Errorf("creating Service: %w", err)
		}
		if _, err := c.kube.NetworkingV1().Ingresses(ns).Create(ctx, ing, create); err != nil {
			return fmt.Errorf("creating Ingress: %w", err)
		}
		return nil
	})
	return time.Since(start), err
}

// deleteAll deletes the App sets rawCreates made. Nothing garbage collects
// without kube-controller-manager, so the children are deleted one by one.
func (c *clients) deleteAll(ctx context.Context, ns string, n, concurrency int) error {
	ignoreNotFound := func(err error) error {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return parallel(ctx, n, concurrency, func(ctx context.Context, i int) error {
		name := newApp(i).Name
		return errors.Join(
			ignoreNotFound(c.crd.AppV1beta1().Apps(ns).Delete(ctx, name, metav1.DeleteOptions{})),
			ignoreNotFound(c.kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{})),
			ignoreNotFound(c.kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})),
			ignoreNotFound(c.kube.NetworkingV1().Ingresses(ns).Delete(ctx, name, metav1.DeleteOptions{})),
		)
	})
}

type controllerResult struct {
	elapsed        time.Duration
	writes, events int
	breakdown      string
}

// controllerRun runs the manager with the App controller, creates the Apps
// and waits until every one has converged.
func (c *clients) controllerRun(ctx context.Context, kubeConfig *rest.Config, cfg config) (controllerResult, error) {
	const ns = "bench-apps"
	if err := c.createNamespace(ctx, ns); err != nil {
		return controllerResult{}, err
	}

	// Watch the Apps converge, with a client of our own.
	converged := map[string]bool{}
	var mu sync.Mutex
	allConverged := make(chan struct{})
	observe := func(obj any) {
		a, ok := obj.(*appv1beta1.App)
		if !ok {
			return
		}
		degraded := meta.FindStatusCondition(a.Status.Conditions, appv1beta1.ConditionDegraded)
		if a.Status.ObservedGeneration != a.Generation || degraded == nil || degraded.Status != metav1.ConditionFalse {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !converged[a.Name] {
			converged[a.Name] = true
			if len(converged) == cfg.apps {
				close(allConverged)
			}
		}
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	factory := crdinformers.NewSharedInformerFactoryWithOptions(c.crd, 0, crdinformers.WithNamespace(ns))
	if _, err := factory.App().V1beta1().Apps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return controllerResult{}, err
	}
	factory.Start(watchCtx.Done())
	defer func() {
		stopWatching()
		factory.Shutdown() // waits for the informers, which stop with watchCtx
	}()
	factory.WaitForCacheSync(watchCtx.Done())

	// The manager, as `controller-manager --controllers=app --kube-api-qps=-1
	// --app-ingress-domain=...` would run it, its writes counted.
	opts := options.NewOptions()
	opts.LeaderElection.LeaderElect = false
	opts.Generic.HTTPAddress = "127.0.0.1:0"
	opts.Generic.SecureServing = false // plain HTTP on loopback: /debug/controllers without a token
	opts.Generic.KubeAPIQPS = -1
	opts.Generic.Controllers = []string{appcontroller.ControllerName}
	opts.App.IngressDomain = ingressDomain
	counted, writes := framework.CountWrites(kubeConfig)
	managerCtx, stopManager := context.WithCancel(ctx)
	defer stopManager()
	m, err := app.NewManager(managerCtx, opts, app.NewRegistry(), app.WithRESTConfig(counted))
	if err != nil {
		return controllerResult{}, err
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(managerCtx) }()
	defer func() {
		stopManager()
		<-done
	}()
	base := "http://" + m.HTTPAddr().String()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		status, _, err := httpGet(ctx, base+"/readyz")
		return err == nil && status == 200, nil
	}); err != nil {
		return controllerResult{}, fmt.Errorf("waiting for the manager to be ready: %w", err)
	}
	before := writes.Total()

	start := time.Now()
	create := metav1.CreateOptions{}
	if err := parallel(ctx, cfg.apps, cfg.concurrency, func(ctx context.Context, i int) error {
		_, err := c.crd.AppV1beta1().Apps(ns).Create(ctx, newApp(i), create)
		return err
	}); err != nil {
		return controllerResult{}, fmt.Errorf("creating Apps: %w", err)
	}
	select {
	case <-allConverged:
	case <-ctx.Done():
		mu.Lock()
		n := len(converged)
		mu.Unlock()
		return controllerResult{}, fmt.Errorf("%d of %d Apps converged: %w", n, cfg.apps, ctx.Err())
	}
	result := controllerResult{elapsed: time.Since(start)}

	// Every App has its children?
	managed := metav1.ListOptions{LabelSelector: controller.ManagedByLabel + "=" + controller.ManagedByValue}
	deployments, err := c.kube.AppsV1().Deployments(ns).List(ctx, managed)
	if err != nil {
		return result, err
	}
	services, err := c.kube.CoreV1().Services(ns).List(ctx, managed)
	if err != nil {
		return result, err
	}
	ingresses, err := c.kube.NetworkingV1().Ingresses(ns).List(ctx, managed)
	if err != nil {
		return result, err
	}
	if d, s, i := len(deployments.Items), len(services.Items), len(ingresses.Items); d != cfg.apps || s != cfg.apps || i != cfg.apps {
		return result, fmt.Errorf("%d Deployments, %d Services, %d Ingresses for %d converged Apps", d, s, i, cfg.apps)
	}

	// Count the writes once the controller is idle: its queue empty, and no
	// write for a second.
	last, lastChange := writes.Total(), time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if total := writes.Total(); total != last {
			last, lastChange = total, time.Now()
		}
		idle, err := queueEmpty(ctx, base)
		return err == nil && idle && time.Since(lastChange) > time.Second, nil
	}); err != nil {
		return result, fmt.Errorf("waiting for the controller to go idle: %w", err)
	}
	// The manager wrote nothing before the Apps were created (no leader
	// election), so the counter holds exactly the benchmark's writes.
	if before != 0 {
		return result, fmt.Errorf("the manager made %d writes before the Apps were created", before)
	}
	byKind := map[string]int{}
	for path, n := range parseSummary(writes.Summary()) {
		kind := kindOf(path)
		byKind[kind] += n
		if strings.HasSuffix(kind, " events") {
			result.events += n
		} else {
			result.writes += n
		}
	}
	var kinds []string
	for k, n := range byKind {
		if !strings.HasSuffix(k, " events") {
			kinds = append(kinds, fmt.Sprintf("%d× %s", n, k))
		}
	}
	sort.Strings(kinds)
	result.breakdown = strings.Join(kinds, ", ")
	return result, nil
}

// parseSummary reads the write counter's summary, "N× METHOD /path" lines.
func parseSummary(summary string) map[string]int {
	counts := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(summary), "\n") {
		count, path, ok := strings.Cut(line, "× ")
		if n, err := strconv.Atoi(count); ok && err == nil {
			counts[path] += n
		}
	}
	return counts
}

// kindOf turns "PUT /apis/g/v/namespaces/ns/apps/a/status" into
// "PUT apps/status": the method, the resource and any subresource.
func kindOf(path string) string {
	method, path, _ := strings.Cut(path, " ")
	_, rest, ok := strings.Cut(path, "/namespaces/")
	if !ok {
		return method + " " + path
	}
	parts := strings.Split(rest, "/") // ns, resource[, name[, subresource]]
	kind := method + " " + parts[min(1, len(parts)-1)]
	if len(parts) > 3 {
		kind += "/" + parts[3]
	}
	return kind
}

func httpGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// queueEmpty reports whether every controller's queue is empty, from the
// manager's /debug/controllers.
func queueEmpty(ctx context.Context, base string) (bool, error) {
	status, body, err := httpGet(ctx, base+"/debug/controllers")
	if err != nil {
		return false, err
	}
	if status != 200 {
		return false, fmt.Errorf("GET /debug/controllers: status %d", status)
	}
	var debug struct {
		Controllers []struct {
			QueueDepth *int `json:"queueDepth"`
		} `json:"controllers"`
	}
	if err := json.Unmarshal(body, &debug); err != nil {
		return false, err
	}
	for _, c := range debug.Controllers {
		if c.QueueDepth == nil || *c.QueueDepth != 0 {
			return false, nil
		}
	}
	return len(debug.Controllers) > 0, nil
}
