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
	"net"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appconversion "github.com/ndsl/controller-manager/apis/app/conversion"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

const scenarioNameConversion = "conversion"

// conversionResult is the cost of reading Apps through v1, the version that
// is not stored: objects per second listed through v1 (each list converted
// by the webhook) and through v1beta1 (no conversion), in the same run.
type conversionResult struct {
	apps, lists      int
	stored, viaV1    float64       // objects/s
	storedP50, v1P50 time.Duration // per list
}

var (
	appsV1beta1GVR = schema.GroupVersionResource{Group: "ingress.example.com", Version: "v1beta1", Resource: "apps"}
	appsV1GVR      = schema.GroupVersionResource{Group: "ingress.example.com", Version: "v1", Resource: "apps"}
)

// scenarioConversion serves the App conversion webhook in this process (the
// manager's converter, over HTTPS on 127.0.0.1), points the App CRD at it,
// creates cfg.conversionApps Apps and times lists of all of them through
// v1beta1 and through v1.
func scenarioConversion(ctx context.Context, c *cluster, cfg config) (conversionResult, error) {
	logger := klog.FromContext(ctx)
	res := conversionResult{apps: cfg.conversionApps, lists: cfg.conversionLists}
	url, caBundle, err := serveConversion(ctx)
	if err != nil {
		return res, err
	}
	restore, err := pointAppConversionAt(ctx, c, url+webhook.PathConvertApps, caBundle)
	if err != nil {
		return res, err
	}
	defer restore()

	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		return res, err
	}
	ns := "bench-conversion"
	if err := c.createNamespace(ctx, ns); err != nil {
		return res, err
	}
	defer func() { _ = c.deleteNamespace(context.WithoutCancel(ctx), ns, cfg.cleanupTimeout) }()
	apps := c.crd.AppV1().Apps(ns)
	if err := parallel(ctx, cfg.conversionApps, cfg.concurrency, func(ctx context.Context, i int) error {
		_, err := apps.Create(ctx, newApp(i, 1), metav1.CreateOptions{})
		return err
	}); err != nil {
		return res, fmt.Errorf("creating the Apps: %w", err)
	}
	list := func(gvr schema.GroupVersionResource) (time.Duration, error) {
		start := time.Now()
		l, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, fmt.Errorf("listing %s: %w", gvr.Version, err)
		}
		if len(l.Items) != cfg.conversionApps {
			return 0, fmt.Errorf("listing %s: %d Apps, want %d", gvr.Version, len(l.Items), cfg.conversionApps)
		}
		return time.Since(start), nil
	}
	// The CRD change reaches the API server's handler a moment later; the
	// first lists also warm its caches and connections.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := list(appsV1GVR)
		return err == nil, nil
	}); err != nil {
		return res, fmt.Errorf("waiting for v1 lists through the conversion webhook: %w", err)
	}
	if _, err := c.waitQuiet(ctx, cfg.quietRate, cfg.quietTimeout); err != nil {
		return res, err
	}
	logger.Info("Timing lists of Apps", "apps", cfg.conversionApps, "lists", cfg.conversionLists)
	var stored, viaV1 []time.Duration
	for range cfg.conversionLists { // interleaved, so both see the same load
		d, err := list(appsV1beta1GVR)
		if err != nil {
			return res, err
		}
		stored = append(stored, d)
		if d, err = list(appsV1GVR); err != nil {
			return res, err
		}
		viaV1 = append(viaV1, d)
	}
	rate := func(ds []time.Duration) float64 {
		var total time.Duration
		for _, d := range ds {
			total += d
		}
		return float64(len(ds)*cfg.conversionApps) / total.Seconds()
	}
	res.stored, res.viaV1 = rate(stored), rate(viaV1)
	res.storedP50, res.v1P50 = median(stored), median(viaV1)
	logger.Info("Conversion", "v1beta1ObjectsPerSecond", fmt.Sprintf("%.0f", res.stored), "v1ObjectsPerSecond", fmt.Sprintf("%.0f", res.viaV1))
	return res, nil
}

func median(ds []time.Duration) time.Duration {
	sorted := append([]time.Duration(nil), ds...)
	for i := range sorted { // a handful of values
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j] < sorted[i] {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	return sorted[len(sorted)/2]
}

// serveConversion runs the App converter behind HTTPS on a loopback port
// until ctx ends and returns its URL and the bundle that verifies it.
func serveConversion(ctx context.Context) (string, []byte, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return "", nil, err
	}
	certs, err := dynamiccertificates.NewStaticCertKeyContent("bench-conversion", certPEM, keyPEM)
	if err != nil {
		return "", nil, err
	}
	s := webhook.NewServer()
	s.HandleConversion(webhook.PathConvertApps, "app-conversion", appconversion.Converter{})
	addr, err := s.Serve(ctx, "127.0.0.1:0", certs)
	if err != nil {
		return "", nil, err
	}
	// The bundle holds the serving certificate and the CA that signed it.
	return "https://" + addr.String(), certPEM, nil
}

// pointAppConversionAt sets the App CRD's conversion to the webhook at url
// and returns a function that puts the previous conversion back.
func pointAppConversionAt(ctx context.Context, c *cluster, url string, caBundle []byte) (func(), error) {
	cs, err := apiextensionsclient.NewForConfig(c.config)
	if err != nil {
		return nil, err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, "apps.ingress.example.com", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	previous, previousVersions := crd.Spec.Conversion.DeepCopy(), crd.DeepCopy().Spec.Versions
	// manifests/crd serves v1 only with the conversion webhook.
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Served = true
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url), CABundle: caBundle},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("pointing the App CRD's conversion at %s: %w", url, err)
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		crd, err := crds.Get(ctx, "apps.ingress.example.com", metav1.GetOptions{})
		if err == nil {
			crd.Spec.Conversion, crd.Spec.Versions = previous, previousVersions
			_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Restoring the App CRD's conversion")
		}
	}, nil
}
