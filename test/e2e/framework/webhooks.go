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

package framework

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/testing/webhookurl"
)

// WebhookConfigurationName names the manifests' Mutating- and
// ValidatingWebhookConfiguration.
const WebhookConfigurationName = "ndsl-controller-manager"

var (
	mutatingGVR   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	validatingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// PointWebhooksAt makes the installed webhook configurations and CRD
// conversion webhooks call base (a URL) instead of the in-cluster Service,
// for managers running as local processes. The caBundles are left to the
// managers.
func (c *Cluster) PointWebhooksAt(ctx context.Context, base string) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	crds, err := controlplane.CRDs()
	if err != nil {
		return err
	}
	targets := []struct {
		gvr  schema.GroupVersionResource
		name string
	}{{mutatingGVR, WebhookConfigurationName}, {validatingGVR, WebhookConfigurationName}}
	for _, crd := range crds {
		targets = append(targets, struct {
			gvr  schema.GroupVersionResource
			name string
		}{crdGVR, crd.Name})
	}
	for _, tg := range targets {
		obj, err := dyn.Resource(tg.gvr).Get(ctx, tg.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading %s %s: %w", tg.gvr.Resource, tg.name, err)
		}
		has, err := webhookurl.Rewrite(obj, base)
		if err != nil {
			return err
		}
		if !has {
			continue
		}
		if _, err := dyn.Resource(tg.gvr).Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pointing %s %s at %s: %w", tg.gvr.Resource, tg.name, base, err)
		}
	}
	return nil
}

// RemoveWebhookConfigurations deletes the installed webhook configurations,
// for local managers that an existing cluster's API server cannot call.
func (c *Cluster) RemoveWebhookConfigurations(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for _, gvr := range []schema.GroupVersionResource{mutatingGVR, validatingGVR} {
		if err := dyn.Resource(gvr).Delete(ctx, WebhookConfigurationName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
