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
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// rawResult is one raw measurement: plain creates of the objects of n
// parents (parent and children, sequentially per parent), concurrency at a
// time, no controller.
type rawResult struct {
	n             int
	createsPerSet int
	elapsed       time.Duration
	// etcdWrites is the growth of the API server's revision during the
	// measurement: every write in the cluster, kube-controller-manager's,
	// scheduler's and kwok's included.
	etcdWrites int64
	cpu        cpuUsage
	before     phaseStart
	// gets are the live GETs (cluster.liveGets) during the measurement:
	// with no controller running, the background the managers' are read
	// against.
	gets float64
	// apiCPU is the API server's CPU profile over the phase, from the
	// first create (profileAPIServer), nil without one.
	apiCPU *cpuBreakdown
}

// apiserverCPUPerSet is the API server's CPU seconds per parent.
func (r rawResult) apiserverCPUPerSet() float64 {
	return r.cpu.Cores["kube-apiserver"] * r.cpu.Wall.Seconds() / float64(r.n)
}

// setsPerSecond is the raw rate in parents per second.
func (r rawResult) setsPerSecond() float64 { return float64(r.n) / r.elapsed.Seconds() }

// createsPerSecond is the raw rate in objects per second.
func (r rawResult) createsPerSecond() float64 {
	return float64(r.n*r.createsPerSet) / r.elapsed.Seconds()
}

// phaseStart is the state of the machine and cluster when a measurement
// started.
type phaseStart struct {
	load1      float64
	background float64 // cluster writes per second just before
	others     float64 // cores used by other processes just before
}

// settle waits for the cluster to be quiet and for other processes to
// leave the CPU alone, and reads the load average.
func settle(ctx context.Context, c *cluster, cfg config) (phaseStart, error) {
	rate, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout)
	if err != nil {
		return phaseStart{}, err
	}
	others, err := waitForeignQuiet(ctx, cfg.maxOthers, cfg.quietTimeout)
	if err != nil {
		return phaseStart{}, err
	}
	load, _ := loadAverage1()
	return phaseStart{load1: load, background: rate, others: others}, nil
}

// measureRaw runs create over n items of scenario and reports the rate, the
// cluster's writes and the CPU used.
func measureRaw(ctx context.Context, c *cluster, cfg config, scenario string, n, createsPerSet int, create func(ctx context.Context, i int) error) (rawResult, error) {
	before, err := settle(ctx, c, cfg)
	if err != nil {
		return rawResult{}, err
	}
	rev0, err := c.revision(ctx)
	if err != nil {
		return rawResult{}, err
	}
	gets0, err := c.liveGets(ctx)
	if err != nil {
		return rawResult{}, err
	}
	cpu0 := takeCPUSnapshot()
	apiProfile := profileAPIServer(ctx, c, cfg, scenario, "raw-"+scenario)
	start := time.Now()
	err = parallel(ctx, n, cfg.concurrency, create)
	elapsed := time.Since(start)
	cpu1 := takeCPUSnapshot()
	apiProfile.stopOnce()
	if err != nil {
		return rawResult{}, err
	}
	rev1, err := c.revision(ctx)
	if err != nil {
		return rawResult{}, err
	}
	gets1, err := c.liveGets(ctx)
	if err != nil {
		return rawResult{}, err
	}
	r := rawResult{n: n, createsPerSet: createsPerSet, elapsed: elapsed, etcdWrites: rev1 - rev0, cpu: cpu0.until(cpu1), before: before, gets: gets1 - gets0}
	r.apiCPU, err = apiProfile.finish(ctx)
	return r, err
}

// rawApps creates n Apps with their Deployment, Service and Ingress as the
// App controller builds them, in namespace ns, then deletes the namespace;
// scenario names the measurement.
func rawApps(ctx context.Context, c *cluster, cfg config, scenario, ns string, n int, replicas int32) (rawResult, error) {
	if err := c.createNamespace(ctx, ns); err != nil {
		return rawResult{}, err
	}
	opts := appcontroller.Options{IngressDomain: ingressDomain}
	create := metav1.CreateOptions{FieldManager: controller.FieldManager}
	r, err := measureRaw(ctx, c, cfg, scenario, n, 4, func(ctx context.Context, i int) error {
		created, err := c.crd.AppV1().Apps(ns).Create(ctx, newApp(i, replicas), create)
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
	if err != nil {
		return r, fmt.Errorf("raw App creates: %w", err)
	}
	return r, c.deleteNamespace(ctx, ns, cfg.cleanupTimeout)
}

// rawPipelines creates n Pipelines and the volume, claim, Deployments and
// Services the Pipeline controller would create for them, then deletes
// them all.
func rawPipelines(ctx context.Context, c *cluster, cfg config, n int) (rawResult, error) {
	const ns = "bench-raw-pipelines"
	if err := c.createNamespace(ctx, ns); err != nil {
		return rawResult{}, err
	}
	create := metav1.CreateOptions{FieldManager: controller.FieldManager}
	r, err := measureRaw(ctx, c, cfg, scenarioNamePipelines, n, 1+2+2*cfg.steps, func(ctx context.Context, i int) error {
		p, err := c.crd.PipelineV1().Pipelines().Create(ctx, newPipeline("raw", i, cfg.steps, ns, c.nodes), create)
		if err != nil {
			return fmt.Errorf("creating Pipeline: %w", err)
		}
		children := rawPipelineChildren(p)
		// The claim first, and the volume reserved for it by UID, as the controller does.
		claim, err := c.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, children.claim, create)
		if err != nil {
			return fmt.Errorf("creating PersistentVolumeClaim: %w", err)
		}
		children.volume.Spec.ClaimRef.UID = claim.UID
		if _, err := c.kube.CoreV1().PersistentVolumes().Create(ctx, children.volume, create); err != nil {
			return fmt.Errorf("creating PersistentVolume: %w", err)
		}
		for s := range children.deployments {
			if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, children.deployments[s], create); err != nil {
				return fmt.Errorf("creating Deployment: %w", err)
			}
			if _, err := c.kube.CoreV1().Services(ns).Create(ctx, children.services[s], create); err != nil {
				return fmt.Errorf("creating Service: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("raw Pipeline creates: %w", err)
	}
	return r, c.deleteRawPipelines(ctx, cfg, ns)
}

// deleteRawPipelines deletes the raw Pipelines, their namespace and their
// volumes, and waits until the volumes are gone (after their claims, once
// kube-controller-manager releases them).
func (c *cluster) deleteRawPipelines(ctx context.Context, cfg config, ns string) error {
	if err := c.crd.PipelineV1().Pipelines().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: benchLabel + "=raw"}); err != nil {
		return fmt.Errorf("deleting the raw Pipelines: %w", err)
	}
	rawVolumes := func(ctx context.Context) ([]string, error) {
		list, err := c.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=model-storage"})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, pv := range list.Items {
			if strings.HasPrefix(pv.Name, "raw-pl-") {
				names = append(names, pv.Name)
			}
		}
		return names, nil
	}
	names, err := rawVolumes(ctx)
	if err != nil {
		return err
	}
	if err := parallel(ctx, len(names), cfg.concurrency, func(ctx context.Context, i int) error {
		err := c.kube.CoreV1().PersistentVolumes().Delete(ctx, names[i], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("deleting the raw PersistentVolumes: %w", err)
	}
	if err := c.deleteNamespace(ctx, ns, cfg.cleanupTimeout); err != nil {
		return err
	}
	var left []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, cfg.cleanupTimeout, true, func(ctx context.Context) (bool, error) {
		left, err = rawVolumes(ctx)
		return err == nil && len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the raw PersistentVolumes %s to be deleted: %w", listNames(left), err)
	}
	return nil
}

// rawIngresses creates n headless annotated Services and the Ingress the
// Ingress controller would create for each, then deletes them.
func rawIngresses(ctx context.Context, c *cluster, cfg config, n int) (rawResult, error) {
	const ns = "bench-raw-ingress"
	if err := c.createNamespace(ctx, ns); err != nil {
		return rawResult{}, err
	}
	create := metav1.CreateOptions{FieldManager: controller.FieldManager}
	r, err := measureRaw(ctx, c, cfg, scenarioNameIngress, n, 2, func(ctx context.Context, i int) error {
		svc, err := c.kube.CoreV1().Services(ns).Create(ctx, newIngressService(i), create)
		if err != nil {
			return fmt.Errorf("creating Service: %w", err)
		}
		ing, err := rawIngress(svc)
		if err != nil {
			return err
		}
		if _, err := c.kube.NetworkingV1().Ingresses(ns).Create(ctx, ing, create); err != nil {
			return fmt.Errorf("creating Ingress: %w", err)
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("raw Service and Ingress creates: %w", err)
	}
	return r, c.deleteNamespace(ctx, ns, cfg.cleanupTimeout)
}

// warmUp creates and deletes App sets (Deployments without replicas): a
// cold API server writes about half as fast.
func warmUp(ctx context.Context, c *cluster, cfg config) error {
	if cfg.warmup == 0 {
		return nil
	}
	r, err := rawApps(ctx, c, cfg, "warm-up", "bench-warmup", cfg.warmup, 0)
	if err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	klog.FromContext(ctx).Info("Warmed up", "creates", r.n*r.createsPerSet, "perSecond", fmt.Sprintf("%.0f", r.createsPerSecond()))
	return nil
}
