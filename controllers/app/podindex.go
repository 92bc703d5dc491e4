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

package app

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// podsByAppIndex indexes the cached pods by the App whose Deployment they
// belong to (appNameOfPod), so that a reconcile reads its own App's pods and
// not every pod of the namespace: with thousands of Apps in a namespace,
// listing by selector made each reconcile, resyncs included, cost a scan of
// all their pods.
const podsByAppIndex = "ingress.example.com/pods-by-app"

// podsByApp is the index function: namespace/App for a pod of an App's
// Deployment, nothing for any other object.
func podsByApp(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	name, ok := appNameOfPod(pod)
	if !ok {
		return nil, nil
	}
	return []string{pod.Namespace + "/" + name}, nil
}

// addPodIndex registers podsByAppIndex on the pod informer, once: another
// App controller built on the same informer finds it there.
func addPodIndex(informer cache.SharedIndexInformer) error {
	if err := controller.AddIndexers(informer, cache.Indexers{podsByAppIndex: podsByApp}); err != nil {
		return fmt.Errorf("indexing the pods by App: %w", err)
	}
	return nil
}

// appPods returns the cached pods of app that selector (its Deployment's)
// matches: the pods podsOf would keep of a List(selector) of the namespace.
func appPods(indexer cache.Indexer, app *appv1.App, selector labels.Selector) ([]*corev1.Pod, error) {
	objs, err := indexer.ByIndex(podsByAppIndex, app.Namespace+"/"+app.Name)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok && selector.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
		}
	}
	return podsOf(app, pods), nil
}
