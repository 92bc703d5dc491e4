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

package configmaprestart

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/examples/configmaprestart"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// descriptor and newConfigMapRestartController are what
// docs/adding-a-controller.md adds to cmd/controller-manager/app/controllers.go.
var descriptor = app.ControllerDescriptor{
	Name: configmaprestart.ControllerName,
	Help: "A Deployment labelled `configmap-restart.ndsl.cn/configmap=<name>` restarts when that ConfigMap changes.",
	Role: configmaprestart.Role,
	New:  newConfigMapRestartController,
}

func newConfigMapRestartController(_ context.Context, cc app.ControllerContext) (app.Controller, error) {
	opts := configmaprestart.DefaultOptions()
	cc.Complete(&opts.Common, configmaprestart.ControllerName)
	client, err := cc.KubeClient(configmaprestart.ControllerName)
	if err != nil {
		return nil, err
	}
	deployments := cc.FilteredInformerFactory(configmaprestart.ControllerName+"-deployments",
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = configmaprestart.DeploymentSelector().String()
		}))
	configMaps := cc.FilteredInformerFactory(configmaprestart.ControllerName+"-configmaps",
		informers.WithTransform(configmaprestart.TransformConfigMap))
	return configmaprestart.NewController(deployments.Apps().V1().Deployments(), configMaps.Core().V1().ConfigMaps(),
		client, cc.EventRecorder(configmaprestart.ControllerName), opts)
}

// The example controller, run by the manager as a ServiceAccount with only
// the rules it declares: opting in restarts nothing, a change of the
// ConfigMap restarts the pods once, and the controller writes its two
// annotations under its own field manager, nothing of what the user set.
func TestConfigMapChangeRestartsTheDeploymentThatNamesIt(t *testing.T) {
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	saConfig := framework.ServiceAccount(t, cp, ns)
	framework.GrantRole(t, cp, ns, "configmap-restart", configmaprestart.Role)
	m := framework.StartManagerWith(t, saConfig, app.Registry{descriptor}, func(o *options.Options) {
		o.Generic.Controllers = []string{"*"}
	})

	cm, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"level": "info"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(name string, labels map[string]string) *appsv1.Deployment {
		pod := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: pod},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: pod, Annotations: map[string]string{"team": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		}
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment("web", map[string]string{configmaprestart.ConfigMapLabel: "settings"}),
		metav1.CreateOptions{FieldManager: "user"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.AppsV1().Deployments(ns).Create(ctx, deployment("other", nil), metav1.CreateOptions{FieldManager: "user"}); err != nil {
		t.Fatal(err)
	}

	get := func(name string) *appsv1.Deployment {
		d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := configmaprestart.Hash(cm)
	framework.Eventually(t, 30*time.Second, "the Deployment records the ConfigMap's hash", func(context.Context) (bool, error) {
		return get("web").Annotations[configmaprestart.HashAnnotation] == first, nil
	})
	// (A Deployment's generation counts its annotations' changes too: the
	// template is what restarts pods.)
	if d := get("web"); !maps.Equal(d.Spec.Template.Annotations, map[string]string{"team": "web"}) {
		t.Fatalf("opting in restarted the pods: template annotations %v", d.Spec.Template.Annotations)
	}

	cm.Data["level"] = "debug"
	if cm, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := configmaprestart.Hash(cm)
	framework.Eventually(t, 30*time.Second, "the Deployment restarts for the new data", func(context.Context) (bool, error) {
		d := get("web")
		return d.Annotations[configmaprestart.HashAnnotation] == second && d.Spec.Template.Annotations[configmaprestart.RestartedForAnnotation] == second, nil
	})
	d := get("web")
	if d.Spec.Template.Annotations["team"] != "web" || d.Spec.Template.Spec.Containers[0].Image != "nginx" || *d.Spec.Replicas != 1 {
		t.Errorf("after the restart, what the user set changed: %s", dump(d))
	}
	for _, f := range d.ManagedFields {
		if f.Manager != configmaprestart.FieldManager {
			continue
		}
		owned := string(f.FieldsV1.Raw)
		for _, field := range []string{"f:replicas", "f:containers", "f:team", "f:selector"} {
			if strings.Contains(owned, field) {
				t.Errorf("the controller's field manager owns %s: %s", field, owned)
			}
		}
	}
	if o := get("other"); len(o.Annotations) != 0 || o.Generation != 1 {
		t.Errorf("a Deployment that does not opt in was written: annotations %v, generation %d", o.Annotations, o.Generation)
	}

	// Level-triggered and idempotent: an unrelated change of the
	// Deployment is reconciled with no write.
	framework.Eventually(t, 30*time.Second, "the queue drains", func(context.Context) (bool, error) { return m.QueuesEmpty() })
	before, reconciled := len(writesOf(m)), framework.ReconcileCount(t, configmaprestart.ControllerName)
	d.Labels["tier"] = "frontend"
	if _, err := client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{FieldManager: "user"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the change is reconciled", func(context.Context) (bool, error) {
		return framework.ReconcileCount(t, configmaprestart.ControllerName) > reconciled, nil
	})
	framework.Eventually(t, 30*time.Second, "the queue drains", func(context.Context) (bool, error) { return m.QueuesEmpty() })
	if after := writesOf(m); len(after) != before {
		t.Errorf("an unrelated change was reconciled with writes: %v", after[before:])
	}
}

// writesOf lists the example controller's writes other than Events.
func writesOf(m *framework.Manager) []string {
	var out []string
	for req, n := range m.Writes.ByClient()[configmaprestart.ControllerName] {
		if !strings.Contains(req, "/events") {
			for range n {
				out = append(out, req)
			}
		}
	}
	return out
}

func dump(d *appsv1.Deployment) string {
	b, _ := json.MarshalIndent(d, "", " ")
	return string(b)
}
