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

package manager

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// crExchange is what one request for a custom resource carried.
type crExchange struct {
	method, path, sent, received string
	code                         int
}

// crRecorder keeps the content types of the requests for Apps.
type crRecorder struct {
	mu        sync.Mutex
	exchanges []crExchange
}

func (r *crRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && strings.Contains(req.URL.Path, "/apis/"+appv1beta1.SchemeGroupVersion.Group+"/") {
			r.mu.Lock()
			r.exchanges = append(r.exchanges, crExchange{method: req.Method, path: req.URL.Path,
				sent: req.Header.Get("Content-Type"), received: resp.Header.Get("Content-Type"), code: resp.StatusCode})
			r.mu.Unlock()
		}
		return resp, err
	})
}

func (r *crRecorder) all() []crExchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]crExchange(nil), r.exchanges...)
}

// With --custom-resource-content-type=application/cbor, on an API server
// with CBORServingAndStorage, the App controller lists, watches and writes
// status in CBOR, and converges an App as it does in JSON.
func TestCustomResourcesInCBOR(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cbor, err := controlplane.Start(ctx, controlplane.Options{
		APIServerArgs: []string{"--feature-gates=CBORServingAndStorage=true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cbor.Stop()
	// Not RequireCRDs: that installs them once per binary, on the shared control plane.
	if err := framework.InstallCRDs(ctx, cbor.Config); err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, cbor.Client)

	var rec crRecorder
	cfg := rest.CopyConfig(cbor.Config)
	cfg.Wrap(rec.wrap)
	framework.StartManager(t, cfg, func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName}
		o.Generic.CustomResourceContentType = options.ContentTypeCBOR
	})

	apps := versioned.NewForConfigOrDie(cbor.Config).AppV1beta1().Apps(ns)
	app := &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "cbor"},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), EnableService: true},
	}
	if _, err := apps.Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the App converged", func(ctx context.Context) (bool, error) {
		got, err := apps.Get(ctx, app.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		degraded := meta.FindStatusCondition(got.Status.Conditions, appv1beta1.ConditionDegraded)
		return got.Status.ObservedGeneration == got.Generation && degraded != nil && degraded.Status == metav1.ConditionFalse, nil
	})

	var lists, statusWrites int
	for _, x := range rec.all() {
		desc := fmt.Sprintf("%s %s: %d, sent %q, received %q", x.method, x.path, x.code, x.sent, x.received)
		if x.code == http.StatusTooManyRequests {
			continue // a fresh API server's priority and fairness; client-go retries
		}
		if x.code >= 300 {
			t.Errorf("%s", desc)
			continue
		}
		if !strings.HasPrefix(x.received, options.ContentTypeCBOR) {
			t.Errorf("%s: the answer is not CBOR", desc)
		}
		switch {
		case x.method == http.MethodGet && strings.HasSuffix(x.path, "/apps"):
			lists++
		case x.method == http.MethodPut && strings.HasSuffix(x.path, "/status"):
			statusWrites++
			if x.sent != options.ContentTypeCBOR {
				t.Errorf("%s: the status was not sent in CBOR", desc)
			}
		}
	}
	if lists == 0 || statusWrites == 0 {
		t.Errorf("saw %d lists and %d status writes of Apps, want some of each", lists, statusWrites)
	}
}
