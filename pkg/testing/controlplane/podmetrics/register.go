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

package podmetrics

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// ServiceName is the ExternalName Service the APIService points at.
const ServiceName = "podmetrics"

// availableTimeout bounds the wait for the aggregator to mark the
// APIService Available (it probes the stand-in's discovery).
const availableTimeout = 2 * time.Minute

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// APIServiceName is the name of the APIService of metrics.k8s.io/v1beta1.
const APIServiceName = Version + "." + Group

// Register points metrics.k8s.io/v1beta1 at the stand-in: an ExternalName
// Service "localhost" in namespace (which must exist) and an APIService
// that skips TLS verification, on the stand-in's port. It waits until the
// aggregator reports the APIService Available.
func (s *Server) Register(ctx context.Context, cfg *rest.Config, namespace string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName, Namespace: namespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if _, err := s.client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the metrics stand-in's Service: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": APIServiceName},
		"spec": map[string]any{
			"group":                 Group,
			"version":               Version,
			"service":               map[string]any{"namespace": namespace, "name": ServiceName, "port": int64(s.Port)},
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100),
			"versionPriority":       int64(100),
		},
	}}
	if _, err := dyn.Resource(apiServices).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating APIService %s: %w", APIServiceName, err)
		}
		return fmt.Errorf("APIService %s exists already: another metrics server is registered", APIServiceName)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, availableTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(apiServices).Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == "Available" {
				last = fmt.Sprintf("Available=%v (%v: %v)", c["status"], c["reason"], c["message"])
				return c["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for APIService %s to be Available (last: %s): %w", APIServiceName, last, err)
	}
	return nil
}
