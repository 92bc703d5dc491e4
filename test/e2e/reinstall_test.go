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

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/certs"
	"github.com/ndsl/controller-manager/test/e2e/framework"
	integration "github.com/ndsl/controller-manager/test/integration/framework"
)

// envReinstall gates TestInClusterHelmUninstallAndReinstallElsewhere: make
// e2e-kind sets it to true for its last stage, after the upgrade test.
const envReinstall = "E2E_REINSTALL"

// The release the reinstall goes to: another name, another namespace.
const (
	otherRelease   = "other"
	otherNamespace = "other-system"
)

// The kept CRDs, as the reads after the uninstall and the reinstall see them.
var (
	appsCRD      = "apps." + appv1beta1.SchemeGroupVersion.Group
	pipelinesCRD = "pipelines." + pipelinev1beta1.SchemeGroupVersion.Group
)

// keptObject is an App or a Pipeline that lives through the uninstall.
type keptObject struct {
	crd, resource, namespace, name string
}

func (o keptObject) String() string {
	if o.namespace == "" {
		return o.resource + " " + o.name
	}
	return o.resource + " " + o.namespace + "/" + o.name
}

// client is the dynamic client of o's resource at version.
func (o keptObject) client(dyn dynamic.Interface, version string) dynamic.ResourceInterface {
	gvr := schema.GroupVersionResource{Group: strings.SplitN(o.crd, ".", 2)[1], Version: version, Resource: o.resource}
	if o.namespace == "" {
		return dyn.Resource(gvr)
	}
	return dyn.Resource(gvr).Namespace(o.namespace)
}

// TestInClusterHelmUninstallAndReinstallElsewhere is issue 37's part 3 on
// real nodes: helm uninstall (the CRDs kept, its pre-delete hook Job run by
// the cluster) leaves every kept App and Pipeline readable at every version
// its CRD then serves, and a namespace holding Apps deletes; helm install
// under another release name into another namespace then takes the CRDs
// over with no manual step: conversion through the new webhook Service, for
// new objects and kept ones.
func TestInClusterHelmUninstallAndReinstallElsewhere(t *testing.T) {
	requireInClusterOnRealNodes(t)
	if os.Getenv(envReinstall) != "true" {
		t.Skipf("%s is not true: make e2e-kind runs this test alone, as its last stage", envReinstall)
	}
	u := helmUpgrade{
		helm: os.Getenv(envHelm), values: os.Getenv(envHelmValues),
		newChart: cluster.RepoRoot() + "/charts/controller-manager", newImage: os.Getenv(envImage),
		kubeconfig: cluster.KubeconfigPath, namespace: framework.ManagerNamespace,
	}
	if u.helm == "" || u.values == "" || u.newImage == "" {
		t.Fatalf("the reinstall test needs %s, %s and %s", envHelm, envHelmValues, envImage)
	}
	other := u
	other.namespace = otherNamespace
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The upgrade stage leaves the release rolled back to an earlier
	// version: the current chart and image first.
	u.install(t, u.newChart, u.newImage)
	waitManagerRolledOut(t, u.newImage)

	kept, doomed := newNamespace(t), newNamespace(t)
	var objs []keptObject
	for _, ns := range []string{kept, doomed} {
		createApp(t, ns, newApp("at-v1beta1", 1, true))
		createRetrying(t, dyn, appAtV1(ns, "at-v1"))
		objs = append(objs, keptObject{appsCRD, "apps", ns, "at-v1beta1"}, keptObject{appsCRD, "apps", ns, "at-v1"})
	}
	pipelines := createPipelines(t, dyn, suffix(kept))
	for _, p := range pipelines {
		objs = append(objs, keptObject{pipelinesCRD, "pipelines", "", p})
	}
	for _, ns := range []string{kept, doomed} {
		waitAppsReady(t, ns, 2, convergeTimeout)
	}
	for _, p := range pipelines {
		waitPipelineConverged(t, p)
	}
	// The uninstall's crds release refuses while objects are stored at
	// v1beta1: the manager has migrated both kinds by now.
	waitStoredVersions(t, appsCRD, "v1")
	waitStoredVersions(t, pipelinesCRD, "v1")

	began := time.Now()
	if _, err := u.run(ctx, "uninstall", helmRelease, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm uninstall %s took %v", helmRelease, time.Since(began).Round(100*time.Millisecond))
	t.Cleanup(func() {
		uninstallOther(t, other)
		// Back to make e2e-kind's install, which the suite's setup waits for.
		u.install(t, u.newChart, u.newImage)
		waitManagerRolledOut(t, u.newImage)
	})
	// Pods in their lame-duck delay still answer on the API server's open
	// connections: the reads below are to see a cluster with no manager.
	eventually(t, 2*time.Minute, "the manager's pods to be gone", func(ctx context.Context) (bool, error) {
		pods, err := cluster.Kube.CoreV1().Pods(framework.ManagerNamespace).List(ctx, metav1.ListOptions{LabelSelector: managerSelector})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
	})
	t.Logf("the manager's pods gone %v after helm uninstall began", time.Since(began).Round(100*time.Millisecond))
	if _, err := cluster.Kube.CoreV1().Services(framework.ManagerNamespace).Get(ctx, "controller-manager-webhook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after helm uninstall the webhook Service: %v, want NotFound", err)
	}
	for _, crd := range []string{appsCRD, pipelinesCRD} {
		if owner := getCRD(t, crd).Annotations[certs.CABundleOwnerAnnotation]; owner != "" {
			t.Errorf("after helm uninstall CRD %s still says %s=%s", crd, certs.CABundleOwnerAnnotation, owner)
		}
	}
	// No retries: a user's kubectl right after the uninstall has none.
	readAtVersions(t, dyn, objs, "after helm uninstall", nil)
	deleteNamespaceAndWait(t, doomed, 2*time.Minute)

	// The reinstall, into a namespace like make e2e-kind's ndsl-system.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := cluster.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(u.newImage, ":")
	began = time.Now()
	if _, err := other.run(ctx, "install", otherRelease, u.newChart, "--create-namespace", "-f", u.values,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag); err != nil {
		t.Fatal(err)
	}
	waitDeploymentRolledOut(t, otherNamespace, framework.ManagerDeploymentName, u.newImage)
	rolledOut := time.Now()
	t.Logf("helm install %s into %s: rolled out in %v", otherRelease, otherNamespace, time.Since(began).Round(100*time.Millisecond))
	for _, crd := range []string{appsCRD, pipelinesCRD} {
		got := getCRD(t, crd)
		conv := got.Spec.Conversion
		if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil ||
			conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil ||
			conv.Webhook.ClientConfig.Service.Namespace != otherNamespace {
			t.Errorf("after the reinstall CRD %s converts through %+v, want the Service in %s", crd, conv, otherNamespace)
		}
		if owner := got.Annotations[certs.CABundleOwnerAnnotation]; !strings.HasPrefix(owner, otherNamespace+"/") {
			t.Errorf("after the reinstall CRD %s: %s=%q, want %s's", crd, certs.CABundleOwnerAnnotation, owner, otherNamespace)
		}
	}

	// Apps are stored at v1: a new App at v1beta1 is the first request that
	// needs the new install's conversion webhook. The API server reaches it
	// once it has the CRD's new caBundle and the Service's new endpoints,
	// shortly after the rollout.
	fresh := newNamespace(t)
	beta := newApp("after-reinstall-v1beta1", 1, true)
	beta.Namespace, beta.APIVersion, beta.Kind = fresh, appv1beta1.SchemeGroupVersion.String(), "App"
	createRetrying(t, dyn, toUnstructured(beta))
	t.Logf("conversion through the reinstall answered %v after its rollout", time.Since(rolledOut).Round(100*time.Millisecond))
	createRetrying(t, dyn, appAtV1(fresh, "after-reinstall"))
	objs = slices.DeleteFunc(objs, func(o keptObject) bool { return o.namespace == doomed })
	objs = append(objs, keptObject{appsCRD, "apps", fresh, "after-reinstall-v1beta1"}, keptObject{appsCRD, "apps", fresh, "after-reinstall"})
	readAtVersions(t, dyn, objs, "after the reinstall", []string{"v1beta1", "v1"})
	waitAppsReady(t, fresh, 2, convergeTimeout)
	waitAppsReady(t, kept, 2, convergeTimeout)
}

// appAtV1 is an App at v1 with one replica of the workload image.
func appAtV1(ns, name string) *unstructured.Unstructured {
	app := &appv1.App{
		TypeMeta: metav1.TypeMeta{APIVersion: appv1.SchemeGroupVersion.String(), Kind: "App"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{appv1beta1.EnableIngressRequestedAnnotation: "false"}},
		Spec: appv1.AppSpec{Image: workloadImage(), Replicas: ptr.To[int32](1)},
	}
	return toUnstructured(app)
}

func toUnstructured(obj runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err) // a typed object of this module always converts
	}
	return &unstructured.Unstructured{Object: m}
}

// createRetrying creates obj, at a version that may need the conversion
// webhook, retrying until the API server can call it.
func createRetrying(t *testing.T, dyn dynamic.Interface, obj *unstructured.Unstructured) {
	t.Helper()
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		t.Fatal(err)
	}
	gvr := gv.WithResource(strings.ToLower(obj.GetKind()) + "s")
	var client dynamic.ResourceInterface = dyn.Resource(gvr)
	if obj.GetNamespace() != "" {
		client = dyn.Resource(gvr).Namespace(obj.GetNamespace())
	}
	what := fmt.Sprintf("creating %s %s at %s", gvr.Resource, obj.GetName(), gv.Version)
	var failed int
	var last error
	eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
		_, err := client.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			failed, last = failed+1, err
			return false, err
		}
		return true, nil
	})
	if failed > 0 {
		t.Logf("%s: %d attempts failed first, the last with: %v", what, failed, last)
	}
}

// createPipelines creates the samples, one at v1beta1 and one at v1 (through
// the conversion webhook), on the cluster's nodes with one replica a step,
// deleted when the test ends, and returns their names.
func createPipelines(t *testing.T, dyn dynamic.Interface, suffix string) []string {
	t.Helper()
	var beta pipelinev1beta1.Pipeline
	integration.LoadManifest(t, "samples/pipeline-v1beta1.yaml", &beta)
	beta.Name = "kept-v1beta1-" + suffix
	onNodes := nodeMapping()
	for i := range beta.Spec.Steps {
		beta.Spec.Steps[i].Location = onNodes(beta.Spec.Steps[i].Location)
		beta.Spec.Steps[i].Image = workloadImage()
		beta.Spec.Steps[i].Replicas = ptr.To[int32](1)
	}
	createPipeline(t, &beta)
	deletePipelineAtEnd(t, beta.Name)

	var v1 pipelinev1.Pipeline
	integration.LoadManifest(t, "samples/pipeline-v1.yaml", &v1)
	v1.Name = "kept-v1-" + suffix
	onNodes = nodeMapping()
	for i := range v1.Spec.Steps {
		for j, n := range v1.Spec.Steps[i].NodeNames {
			v1.Spec.Steps[i].NodeNames[j] = onNodes(n)
		}
		v1.Spec.Steps[i].Image = workloadImage()
		v1.Spec.Steps[i].Replicas = ptr.To[int32](1)
	}
	deletePipelineAtEnd(t, v1.Name)
	createRetrying(t, dyn, toUnstructured(&v1))
	return []string{beta.Name, v1.Name}
}

// waitPipelineConverged waits until the manager has converged the Pipeline:
// Ready where its pods can mount the samples' share, else its storage bound.
func waitPipelineConverged(t *testing.T, name string) {
	t.Helper()
	if samplesMountable() {
		waitPipeline(t, name, "Ready=True", func(p *pipelinev1beta1.Pipeline) bool {
			return pipelineCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "")
		})
		return
	}
	waitPipeline(t, name, "StorageReady=True", func(p *pipelinev1beta1.Pipeline) bool {
		return pipelineCondition(p, pipelinev1beta1.ConditionStorageReady, metav1.ConditionTrue, "")
	})
}

// readAtVersions gets every object, and lists its namespace (or its
// cluster-scoped resource), at each of versions; nil means at every version
// its CRD serves now.
func readAtVersions(t *testing.T, dyn dynamic.Interface, objs []keptObject, when string, versions []string) {
	t.Helper()
	ctx := context.Background()
	served := map[string][]string{}
	for _, o := range objs {
		vs := versions
		if vs == nil {
			if served[o.crd] == nil {
				for _, v := range getCRD(t, o.crd).Spec.Versions {
					if v.Served {
						served[o.crd] = append(served[o.crd], v.Name)
					}
				}
				t.Logf("%s: CRD %s serves %v", when, o.crd, served[o.crd])
			}
			vs = served[o.crd]
		}
		for _, v := range vs {
			if _, err := o.client(dyn, v).Get(ctx, o.name, metav1.GetOptions{}); err != nil {
				t.Errorf("%s: get %s at %s: %v", when, o, v, err)
			}
			list, err := o.client(dyn, v).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("%s: list %s at %s: %v", when, o.resource, v, err)
				continue
			}
			if !slices.ContainsFunc(list.Items, func(item unstructured.Unstructured) bool { return item.GetName() == o.name }) {
				t.Errorf("%s: list of %s at %s lacks %s", when, o.resource, v, o)
			}
		}
	}
}

// deleteNamespaceAndWait deletes ns and waits until it is gone, failing
// with the namespace's conditions (e.g. ContentDeletionFailed) if not.
func deleteNamespaceAndWait(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	began := time.Now()
	if err := cluster.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	// The namespace's conditions, not the poll's own errors, say why not.
	state := "not observed"
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := cluster.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
		state = string(got.Status.Phase)
		for _, c := range got.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				state += fmt.Sprintf("; %s: %s", c.Type, c.Message)
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("namespace %s not deleted within %v: %s", ns, timeout, state)
	}
	t.Logf("namespace %s deleted in %v", ns, time.Since(began).Round(100*time.Millisecond))
}

// uninstallOther removes the reinstall, so that ndsl can go back into
// ndsl-system: the chart's cluster-scoped objects have fixed names.
func uninstallOther(t *testing.T, other helmUpgrade) {
	if _, err := other.run(context.Background(), "uninstall", otherRelease, "--wait", "--timeout", "3m", "--ignore-not-found"); err != nil {
		t.Error(err)
	}
	deleteNamespaceAndWait(t, otherNamespace, 2*time.Minute)
}

func getCRD(t *testing.T, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}
