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

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// cluster is the control plane the benchmark runs against, and its clients.
type cluster struct {
	kubeconfig string
	config     *rest.Config // admin, as loaded
	kube       kubernetes.Interface
	crd        versioned.Interface
	// local is the control plane this command started; nil when reusing one.
	local *controlplane.ControlPlane
	nodes []string
}

// startCluster starts the local control plane (etcd with fsync,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok), or loads
// $KUBECONFIG's, installs the CRDs and creates the kwok nodes.
func startCluster(ctx context.Context, cfg config) (*cluster, error) {
	c := &cluster{}
	if cfg.useExisting {
		path := os.Getenv("KUBECONFIG")
		if path == "" {
			return nil, errors.New("--use-existing-cluster needs $KUBECONFIG")
		}
		c.kubeconfig = filepath.SplitList(path)[0]
		loaded, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", c.kubeconfig, err)
		}
		c.config = loaded
	} else {
		dir := filepath.Join(cfg.artifacts, "controlplane")
		if err := controlplane.RemoveState(dir); err != nil {
			return nil, err
		}
		startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		cp, err := controlplane.Start(startCtx, controlplane.Options{
			BinDir: cfg.binDir, Dir: dir, Fsync: true,
			ControllerManager: true, Scheduler: true, Kwok: true,
			APIServerArgs: cfg.apiserverArgs,
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("starting the control plane: %w", err)
		}
		c.local, c.kubeconfig, c.config = cp, cp.KubeconfigPath, cp.Config
	}
	kubeConfig, crdConfig := clientConfigs(c.config)
	var err error
	if c.kube, err = kubernetes.NewForConfig(kubeConfig); err != nil {
		return c, err
	}
	if c.crd, err = versioned.NewForConfig(crdConfig); err != nil {
		return c, err
	}
	if err := framework.InstallCRDs(ctx, c.config); err != nil {
		return c, err
	}
	// A CRD is served a moment after it is established.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err1 := c.crd.AppV1().Apps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		_, err2 := c.crd.PipelineV1().Pipelines().List(ctx, metav1.ListOptions{Limit: 1})
		return err1 == nil && err2 == nil, nil
	}); err != nil {
		return c, fmt.Errorf("waiting for the CRDs to be served: %w", err)
	}
	if err := c.createNodes(ctx, cfg.nodes, cfg.podsPerNode); err != nil {
		return c, err
	}
	return c, nil
}

func (c *cluster) stop() {
	if c.local != nil {
		if err := c.local.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}
}

// clientConfigs are the benchmark's client configs, as the manager's flags
// make its own with --kube-api-qps=-1: protobuf for built-in types, JSON for
// custom resources, no client-side rate limiting.
func clientConfigs(admin *rest.Config) (kube, crd *rest.Config) {
	kube = rest.CopyConfig(admin)
	kube.QPS = -1
	kube.ContentType = "application/vnd.kubernetes.protobuf"
	kube.AcceptContentTypes = kube.ContentType + ",application/json"
	kube.UserAgent = "bench-scale"
	// The benchmark writes v1beta1 on purpose: its deprecation warning, once
	// per request, would be most of the log.
	kube.WarningHandler = rest.NoWarnings{}
	crd = rest.CopyConfig(kube)
	crd.ContentType = "application/json"
	crd.AcceptContentTypes = "application/json"
	return kube, crd
}

// createNodes creates n kwok nodes (kept if they exist) with room for pods
// pods each and waits until they are Ready: kwok must run in the cluster.
func (c *cluster) createNodes(ctx context.Context, n, pods int) error {
	for i := 1; i <= n; i++ {
		c.nodes = append(c.nodes, fmt.Sprintf("bench-node-%d", i))
	}
	return controlplane.CreateFakeNodes(ctx, c.kube, pods, c.nodes...)
}

func (c *cluster) createNamespace(ctx context.Context, name string) error {
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// deleteNamespace deletes a namespace and waits until it is gone: the
// namespace controller deletes its contents by collection, and kwok ends
// its pods.
func (c *cluster) deleteNamespace(ctx context.Context, name string, timeout time.Duration) error {
	err := c.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace %s to be deleted: %w", name, err)
	}
	return nil
}

// revision is the API server's current resourceVersion, in practice etcd's
// revision: it grows by one per write, whoever makes it.
func (c *cluster) revision(ctx context.Context) (int64, error) {
	list, err := c.kube.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(list.ResourceVersion, 10, 64)
}

// waitQuiet waits until the cluster writes less than maxRate objects per
// second over 3 seconds, and serves less than one live GET of the counted
// resources per second: kube-controller-manager, the scheduler and kwok
// have caught up with the last phase (the garbage collector GETs the owners
// of what a deleted namespace held for a while after it is gone, which
// would count as the next measurement's). It returns the last write rate
// seen; a timeout is logged, not an error.
func (c *cluster) waitQuiet(ctx context.Context, maxRate float64, timeout time.Duration) (float64, error) {
	type point struct {
		at   time.Time
		rev  int64
		gets float64
	}
	var points []point
	rate, getRate := -1.0, -1.0
	begin := time.Now()
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		rev, err := c.revision(ctx)
		if err != nil {
			return false, nil
		}
		gets, err := c.liveGets(ctx)
		if err != nil {
			return false, nil
		}
		points = append(points, point{time.Now(), rev, gets})
		for len(points) > 1 && points[len(points)-1].at.Sub(points[1].at) >= 3*time.Second {
			points = points[1:]
		}
		first, last := points[0], points[len(points)-1]
		if last.at.Sub(first.at) < 3*time.Second-100*time.Millisecond {
			return false, nil
		}
		rate = float64(last.rev-first.rev) / last.at.Sub(first.at).Seconds()
		getRate = (last.gets - first.gets) / last.at.Sub(first.at).Seconds()
		return rate < maxRate && getRate < 1, nil
	})
	if ctx.Err() != nil {
		return rate, ctx.Err()
	}
	if err != nil {
		klog.FromContext(ctx).Info("The cluster did not get quiet; going on", "writesPerSecond", rate, "liveGetsPerSecond", getRate, "waited", time.Since(begin).Round(time.Second))
	} else {
		klog.FromContext(ctx).V(1).Info("Cluster quiet", "writesPerSecond", rate, "waited", time.Since(begin).Round(time.Second))
	}
	return rate, nil
}

// cachedResources are the resources the manager's informers cache with all
// default controllers on.
var cachedResources = []schema.GroupVersionResource{
	appv1.SchemeGroupVersion.WithResource("apps"),
	pipelinev1.SchemeGroupVersion.WithResource("pipelines"),
	appsv1.SchemeGroupVersion.WithResource("deployments"),
	corev1.SchemeGroupVersion.WithResource("services"),
	networkingv1.SchemeGroupVersion.WithResource("ingresses"),
	corev1.SchemeGroupVersion.WithResource("persistentvolumes"),
	corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
	corev1.SchemeGroupVersion.WithResource("namespaces"),
	corev1.SchemeGroupVersion.WithResource("nodes"),
}

// cachedObjects counts, cluster-wide, the objects of every resource the
// manager caches, by listing their metadata a page at a time.
func (c *cluster) cachedObjects(ctx context.Context) (int, map[string]int, error) {
	client, err := metadata.NewForConfig(c.config)
	if err != nil {
		return 0, nil, err
	}
	byResource := map[string]int{}
	total := 0
	for _, gvr := range cachedResources {
		opts := metav1.ListOptions{Limit: 500}
		for {
			l, err := client.Resource(gvr).List(ctx, opts)
			if err != nil {
				return 0, nil, fmt.Errorf("counting %s: %w", gvr.Resource, err)
			}
			byResource[gvr.Resource] += len(l.Items)
			total += len(l.Items)
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
	}
	return total, byResource, nil
}

// eventWrites counts the writes of the manager's event recorder in
// namespace from the Events component reported about objects whose name
// starts with prefix: one create per Event and one patch per repetition
// (count - 1). The prefix keeps out Events about other scenarios' objects
// in a shared namespace, such as the raw Pipelines' in default.
func (c *cluster) eventWrites(ctx context.Context, namespace, component, prefix string) (creates, patches int, err error) {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.kube.CoreV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return 0, 0, fmt.Errorf("listing events in %s: %w", namespace, err)
		}
		for _, e := range list.Items {
			if countedEvent(&e, component, prefix) {
				creates++
				patches += int(max(e.Count, 1)) - 1
			}
		}
		if list.Continue == "" {
			return creates, patches, nil
		}
		opts.Continue = list.Continue
	}
}

// countedEvent reports whether e was reported by component about an object
// whose name starts with prefix.
func countedEvent(e *corev1.Event, component, prefix string) bool {
	return (e.Source.Component == component || e.ReportingController == component) &&
		strings.HasPrefix(e.InvolvedObject.Name, prefix)
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

// listNames is a helper for messages: up to five names.
func listNames(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// managedObjects counts, cluster-wide, what the manager manages: Apps,
// Pipelines, Services annotated for an Ingress (parents), and every object
// carrying its managed-by label (children).
func (c *cluster) managedObjects(ctx context.Context) (int, error) {
	client, err := metadata.NewForConfig(c.config)
	if err != nil {
		return 0, err
	}
	count := func(gvr schema.GroupVersionResource, selector string, keep func(metav1.Object) bool) (int, error) {
		n := 0
		opts := metav1.ListOptions{Limit: 500, LabelSelector: selector}
		for {
			l, err := client.Resource(gvr).List(ctx, opts)
			if err != nil {
				return 0, fmt.Errorf("counting %s: %w", gvr.Resource, err)
			}
			for i := range l.Items {
				if keep == nil || keep(&l.Items[i]) {
					n++
				}
			}
			if opts.Continue = l.Continue; opts.Continue == "" {
				return n, nil
			}
		}
	}
	managed := controller.ManagedByLabel + "=" + controller.ManagedByValue
	total := 0
	for _, q := range []struct {
		gvr      schema.GroupVersionResource
		selector string
		keep     func(metav1.Object) bool
	}{
		{appv1.SchemeGroupVersion.WithResource("apps"), "", nil},
		{pipelinev1.SchemeGroupVersion.WithResource("pipelines"), "", nil},
		{corev1.SchemeGroupVersion.WithResource("services"), "!" + controller.ManagedByLabel, func(o metav1.Object) bool {
			_, annotated := o.GetAnnotations()[ingress.AnnotationEnabled]
			return annotated
		}},
		{appsv1.SchemeGroupVersion.WithResource("deployments"), managed, nil},
		{corev1.SchemeGroupVersion.WithResource("services"), managed, nil},
		{networkingv1.SchemeGroupVersion.WithResource("ingresses"), managed, nil},
		{corev1.SchemeGroupVersion.WithResource("persistentvolumes"), managed, nil},
		{corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), managed, nil},
	} {
		n, err := count(q.gvr, q.selector, q.keep)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
