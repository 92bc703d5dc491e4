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

package appcoexist

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// getScale reads the App's scale subresource, as an HPA or KEDA does.
func (e *env) getScale(ctx context.Context, name string) (*autoscalingv1.Scale, error) {
	raw, err := e.typed.AppV1beta1().RESTClient().Get().Namespace(e.ns).Resource("apps").Name(name).SubResource("scale").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	scale := &autoscalingv1.Scale{}
	return scale, json.Unmarshal(raw, scale)
}

// updateScale writes the App's scale subresource.
func (e *env) updateScale(ctx context.Context, scale *autoscalingv1.Scale) error {
	body, err := json.Marshal(scale)
	if err != nil {
		return err
	}
	return e.typed.AppV1beta1().RESTClient().Put().Namespace(e.ns).Resource("apps").Name(scale.Name).SubResource("scale").
		Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
}

// The App's scale subresource is what an HPA, KEDA and kubectl scale use:
// replicas written there flow to the Deployment, and its selector selects
// exactly the App's pods.
func TestScaleSubresource(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.startManager()
	e.create(&appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "scaled"},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), EnableService: true},
	})
	e.waitApp("scaled", "ready", ready)

	scale, err := e.getScale(ctx, "scaled")
	if err != nil {
		t.Fatalf("GET apps/scaled/scale: %v", err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Replicas != 1 {
		t.Errorf("scale = %+v, want 1 replica desired and 1 observed", scale)
	}
	scale.Spec.Replicas = 3
	if err := e.updateScale(ctx, scale); err != nil {
		t.Fatalf("PUT apps/scaled/scale: %v", err)
	}
	e.waitApp("scaled", "3 replicas ready", func(a *appv1beta1.App) bool {
		return ready(a) && a.Status.AvailableReplicas == 3 && ptr.Deref(a.Spec.Replicas, 0) == 3
	})
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, 0); got != 3 {
		t.Errorf("Deployment replicas = %d, want 3 from the App's scale", got)
	}

	// The selector the scale reports selects the App's pods, all of them
	// and only them: what an HPA reads the metrics of.
	framework.Eventually(t, timeout, "the scale to report 3 replicas", func(ctx context.Context) (bool, error) {
		scale, err = e.getScale(ctx, "scaled")
		return err == nil && scale.Status.Replicas == 3, err
	})
	if scale.Status.Selector == "" {
		t.Fatalf("scale %+v has no selector (the App's status.selector)", scale)
	}
	selector, err := labels.Parse(scale.Status.Selector)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 || len(all.Items) != 3 {
		t.Errorf("selector %s selects %d pods of the namespace's %d, want all 3 of the App's", selector, len(pods.Items), len(all.Items))
	}

	// kubectl scale app works too, and scales down.
	kubectl, err := controlplane.KubectlPath("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.KubeconfigPath, "-n", e.ns,
		"scale", "apps.ingress.example.com/scaled", "--replicas=2").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl scale: %v: %s", err, strings.TrimSpace(string(out)))
	}
	e.waitApp("scaled", "2 replicas ready", func(a *appv1beta1.App) bool {
		return ready(a) && a.Status.Replicas == 2 && a.Status.AvailableReplicas == 2
	})
}
