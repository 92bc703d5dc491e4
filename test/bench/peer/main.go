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

// Command peer is the benchmark's peer: an App operator written with
// controller-runtime the way its careful users write it, run by
// test/bench/scale beside the controller manager on the same App scenario
// (issue 26). Owns() watches on its children, CreateOrUpdate from the
// cache with a mutate function that sets only the fields it owns, status
// written only when it changed, the documented label-selected cache for
// the children, 5 workers and no client-side rate limit. It makes the
// children the App controller makes (controllers/app/children.go): same
// names, labels, selectors, ports and Ingress host, and a status the
// benchmark's convergence detector accepts.
//
// It takes the flags test/e2e/framework's launcher passes the manager and
// serves /healthz, /readyz and /metrics (controller-runtime's registry) on
// --http-address. It lives in a module of its own so that the manager's
// module never depends on controller-runtime.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
)

func main() {
	var httpAddress, ingressDomain, appSelector string
	var qps float64
	var workers int
	// --kubeconfig is controller-runtime's own flag (pkg/client/config).
	flag.StringVar(&httpAddress, "http-address", "127.0.0.1:8080", "Address of /healthz, /readyz and /metrics (plain HTTP).")
	flag.Bool("secure-serving", false, "Ignored: always plain HTTP (the launcher passes it).")
	flag.Bool("webhooks", false, "Ignored: the peer serves no webhooks (the launcher passes it).")
	flag.Float64Var(&qps, "kube-api-qps", -1, "Client QPS; negative: no client-side rate limit.")
	flag.StringVar(&ingressDomain, "app-ingress-domain", "", "Ingress hosts are <app>.<namespace>.<domain>.")
	flag.StringVar(&appSelector, "app-selector", "", "Label selector of the Apps to cache and reconcile; empty: all.")
	flag.IntVar(&workers, "workers", 5, "MaxConcurrentReconciles (the manager's default App workers).")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	if err := run(ctrl.SetupSignalHandler(), httpAddress, ingressDomain, appSelector, float32(qps), workers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, httpAddress, ingressDomain, appSelector string, qps float32, workers int) error {
	apps, err := labels.Parse(appSelector)
	if err != nil {
		return fmt.Errorf("--app-selector: %w", err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// JSON, controller-runtime's default: its one client serves the App
	// too, which has no protobuf encoding.
	cfg.QPS, cfg.Burst = qps, 1000

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := appv1.AddToScheme(scheme); err != nil {
		return err
	}
	// The documented way to keep the cache to what the operator manages.
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue})}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"}, // served below, beside /healthz
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: managed, &corev1.Service{}: managed, &networkingv1.Ingress{}: managed,
			&appv1.App{}: {Label: apps},
		}},
	})
	if err != nil {
		return fmt.Errorf("building the manager: %w", err)
	}
	r := &appReconciler{Client: mgr.GetClient(), scheme: scheme, ingressDomain: ingressDomain}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&appv1.App{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.Ingress{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r); err != nil {
		return fmt.Errorf("building the App controller: %w", err)
	}
	if err := serveHTTP(ctx, httpAddress, mgr.GetCache()); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// serveHTTP serves /healthz, /readyz (caches synced) and /metrics.
func serveHTTP(ctx context.Context, address string, c cache.Cache) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) {
		syncCtx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(syncCtx) {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	// The benchmark's CPU and heap profiles of the convergence, as the
	// manager's --profiling serves them.
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.Handle("/debug/pprof/heap", pprof.Handler("heap"))
	l, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return nil
}
