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
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A Helm release named like the App labels its pods with Helm's and Argo
// CD's app.kubernetes.io/instance and app.kubernetes.io/name: Running and
// Ready in the App's namespace, such a pod is never behind the App's
// Service nor selected by its Deployment.
func TestForeignPodNotSelected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	helm := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-helm-0", Labels: map[string]string{
			"app.kubernetes.io/instance":   "web",
			"app.kubernetes.io/name":       "web",
			"app.kubernetes.io/managed-by": "Helm",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
	if _, err := e.kube.CoreV1().Pods(e.ns).Create(ctx, helm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Helm pod to be ready", func(ctx context.Context) (bool, error) {
		pod, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, helm.Name, metav1.GetOptions{})
		return err == nil && podReady(pod), err
	})

	e.startManager()
	e.create(&appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1), EnableService: true},
	})
	e.waitApp("web", "ready", ready)

	// The App's own pod is behind the Service, and only it.
	var pods []string
	framework.Eventually(t, timeout, "one ready endpoint of the App's pod", func(ctx context.Context) (bool, error) {
		var err error
		pods, _, err = e.endpoints(ctx, "web")
		if slices.Contains(pods, helm.Name) {
			t.Fatalf("the Helm pod %s is behind the App's Service: ready endpoints %v", helm.Name, pods)
		}
		return len(pods) == 1, err
	})

	svc, err := e.kube.CoreV1().Services(e.ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(helm.Labels)) {
		t.Errorf("Service selector %v matches the Helm pod's labels %v", svc.Spec.Selector, helm.Labels)
	}
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if selector.Matches(labels.Set(helm.Labels)) {
		t.Errorf("Deployment selector %s matches the Helm pod's labels %v", selector, helm.Labels)
	}
	// Nothing of the App's claims Helm's or Argo CD's label.
	for _, obj := range []metav1.Object{d, &d.Spec.Template, svc} {
		if v, ok := obj.GetLabels()["app.kubernetes.io/instance"]; ok {
			t.Errorf("%T %s carries app.kubernetes.io/instance=%s, Helm's and Argo CD's label", obj, obj.GetName(), v)
		}
	}
}
