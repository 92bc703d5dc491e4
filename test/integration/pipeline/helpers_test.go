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

package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// timeout bounds every wait: pods on kwok nodes need the scheduler, the
// Deployment and ReplicaSet controllers and kwok, a few seconds in all.
const timeout = 90 * time.Second

// env is one test's manager and clients.
type env struct {
	t    *testing.T
	kube kubernetes.Interface
	crd  versioned.Interface
	m    *framework.Manager
}

// setup starts a manager running only the Pipeline controller.
func setup(t *testing.T, mutate func(*options.Options)) *env {
	t.Helper()
	return setupWithConfig(t, cp.Config, mutate)
}

// setupWithConfig is setup with the manager talking to the API server
// through cfg.
func setupWithConfig(t *testing.T, cfg *rest.Config, mutate func(*options.Options)) *env {
	t.Helper()
	if crdErr != nil {
		t.Fatalf("installing the CRDs: %v", crdErr)
	}
	crd, err := newCRDClient()
	if err != nil {
		t.Fatal(err)
	}
	m := framework.StartManager(t, cfg, func(o *options.Options) {
		o.Generic.Controllers = []string{pipeline.ControllerName}
		// Tests use a namespace of their own; TestNamespaceOutsideTheAllowList
		// puts the default back. Tests about the controller creating
		// namespaces turn CreateNamespaces on.
		o.Pipeline.AllowedNamespaces = []string{pipeline.AnyNamespace}
		if mutate != nil {
			mutate(o)
		}
	})
	return &env{t: t, kube: cp.Client, crd: crd, m: m}
}

// newCRDClient is an admin client for Pipelines.
func newCRDClient() (versioned.Interface, error) {
	return versioned.NewForConfig(cp.Config)
}

// stepName names the Deployment and Service of a Pipeline's step.
func stepName(pipelineName, model string) string { return pipeline.StepName(pipelineName, model) }

// step is a step serving model on node.
func step(model, node string) pipelinev1beta1.PipelineStep {
	return pipelinev1beta1.PipelineStep{Model: model, Image: "nginx:latest", Location: node}
}

// newPipeline is a Pipeline whose children go to namespace.
func newPipeline(name, namespace string, steps ...pipelinev1beta1.PipelineStep) *pipelinev1beta1.Pipeline {
	return &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps:     steps,
			Namespace: namespace,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"},
			},
		},
	}
}

// create creates p and deletes it when the test ends.
func (e *env) create(p *pipelinev1beta1.Pipeline) *pipelinev1beta1.Pipeline {
	e.t.Helper()
	created, err := e.crd.PipelineV1beta1().Pipelines().Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating Pipeline %s: %v", p.Name, err)
	}
	e.t.Cleanup(func() { e.deletePipeline(created.Name, false) })
	return created
}

// deletePipeline deletes a Pipeline and waits until it is gone and, with
// children, until the garbage collector has removed its Deployments and
// its PersistentVolume too, so that a new Pipeline may reuse the name.
func (e *env) deletePipeline(name string, children bool) {
	e.t.Helper()
	ctx := context.Background()
	err := e.crd.PipelineV1beta1().Pipelines().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("deleting Pipeline %s: %v", name, err)
		return
	}
	selector := labels.SelectorFromSet(labels.Set{pipeline.LabelPipeline: name}).String()
	framework.Eventually(e.t, timeout, "Pipeline "+name+" and its children to be gone", func(ctx context.Context) (bool, error) {
		if _, err := e.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, err
		}
		if !children {
			return true, nil
		}
		deployments, err := e.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		volumes, err := e.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		return len(deployments.Items) == 0 && len(volumes.Items) == 0, nil
	})
}

func (e *env) get(name string) *pipelinev1beta1.Pipeline {
	e.t.Helper()
	p, err := e.crd.PipelineV1beta1().Pipelines().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// update applies change to the latest Pipeline, retrying on conflicts with
// the controller's status writes.
func (e *env) update(name string, change func(p *pipelinev1beta1.Pipeline)) *pipelinev1beta1.Pipeline {
	e.t.Helper()
	var updated *pipelinev1beta1.Pipeline
	framework.Eventually(e.t, timeout, "updating Pipeline "+name, func(ctx context.Context) (bool, error) {
		p, err := e.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(p)
		updated, err = e.crd.PipelineV1beta1().Pipelines().Update(ctx, p, metav1.UpdateOptions{})
		return err == nil, err
	})
	return updated
}

// waitFor polls the Pipeline until cond holds and returns it.
func (e *env) waitFor(name, what string, cond func(p *pipelinev1beta1.Pipeline) bool) *pipelinev1beta1.Pipeline {
	e.t.Helper()
	var p *pipelinev1beta1.Pipeline
	framework.Eventually(e.t, timeout, what, func(ctx context.Context) (bool, error) {
		var err error
		p, err = e.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cond(p) {
			return true, nil
		}
		return false, fmt.Errorf("status: %s", describeStatus(p))
	})
	return p
}

// waitCondition waits for a condition of the current generation with status
// and a message containing msg.
func (e *env) waitCondition(name, typ string, status metav1.ConditionStatus, msg string) *pipelinev1beta1.Pipeline {
	e.t.Helper()
	return e.waitFor(name, fmt.Sprintf("%s=%s %q on Pipeline %s", typ, status, msg, name), func(p *pipelinev1beta1.Pipeline) bool {
		return hasCondition(p, typ, status, msg)
	})
}

func hasCondition(p *pipelinev1beta1.Pipeline, typ string, status metav1.ConditionStatus, msg string) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	return p.Status.ObservedGeneration == p.Generation && c != nil && c.Status == status && strings.Contains(c.Message, msg)
}

// describeStatus is a one-line summary of the conditions for failure messages.
func describeStatus(p *pipelinev1beta1.Pipeline) string {
	var parts []string
	for _, c := range p.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("generation %d observed %d: %s", p.Generation, p.Status.ObservedGeneration, strings.Join(parts, " "))
}

// ready waits for Ready=True.
func (e *env) ready(name string) *pipelinev1beta1.Pipeline {
	e.t.Helper()
	return e.waitCondition(name, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "")
}

// desiredChildren is pipeline.DesiredChildren of p as the controller reads
// it: converted to v1, the stored version.
func desiredChildren(p *pipelinev1beta1.Pipeline, namespace string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim, []*appsv1.Deployment, []*corev1.Service) {
	stored := &pipelinev1.Pipeline{}
	if err := conversion.V1beta1ToV1(p, stored); err != nil {
		panic(err)
	}
	return pipeline.DesiredChildren(stored, namespace)
}

// ownedAtV1beta1 has objs name their Pipeline at v1beta1, as the children
// of managers before v1 storage did.
func ownedAtV1beta1(objs ...metav1.Object) {
	for _, obj := range objs {
		refs := obj.GetOwnerReferences()
		for i := range refs {
			refs[i].APIVersion = pipelinev1beta1.SchemeGroupVersion.String()
		}
		obj.SetOwnerReferences(refs)
	}
}

// ownedBy fails unless obj's controller reference is the Pipeline.
func ownedBy(t *testing.T, obj metav1.Object, p *pipelinev1beta1.Pipeline) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != p.UID || ref.Kind != "Pipeline" || ref.APIVersion != "distri-infer.ndsl.cn/v1" ||
		!ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("%s: controller reference %+v, want Pipeline %s (%s)", obj.GetName(), ref, p.Name, p.UID)
	}
}

// checkChildren checks every child of a converged Pipeline against its spec:
// storage, and per step the Deployment and Service with env, args,
// affinity, mount, labels and owner references.
func checkChildren(t *testing.T, kube kubernetes.Interface, p *pipelinev1beta1.Pipeline, namespace string) {
	t.Helper()
	ctx := context.Background()
	storage := p.Status.Storage
	if storage == nil || storage.PVName == "" || storage.PVCName != storage.PVName {
		t.Fatalf("status.storage = %+v", storage)
	}
	pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, storage.PVName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownedBy(t, pv, p)
	ms := &p.Spec.ModelStorage
	if c := pv.Spec.CSI; c == nil || c.Driver != "nfs.csi.k8s.io" || c.VolumeAttributes["server"] != ms.NFSServer() ||
		c.VolumeAttributes["share"] != ms.NFSShare() || c.VolumeAttributes["subDir"] != p.Name || !strings.HasSuffix(c.VolumeHandle, "#"+pv.Name) {
		t.Errorf("PV csi = %+v", pv.Spec.CSI)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
		len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != corev1.ReadWriteMany {
		t.Errorf("PV reclaim %s, access %v; want Retain, RWX", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.AccessModes)
	}
	pvc, err := kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, storage.PVCName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownedBy(t, pvc, p)
	if pvc.Spec.VolumeName != pv.Name || ptr.Deref(pvc.Spec.StorageClassName, "<nil>") != "" {
		t.Errorf("PVC volumeName %q class %v; want %q and \"\"", pvc.Spec.VolumeName, pvc.Spec.StorageClassName, pv.Name)
	}
	// Reserved for this claim by UID: no other claim of its name binds it.
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != namespace || ref.Name != pvc.Name || ref.UID != pvc.UID {
		t.Errorf("PV claimRef = %+v, want %s/%s uid %s", ref, namespace, pvc.Name, pvc.UID)
	}
	// The claim names its volume's UID: the change that makes the binder
	// bind them at once, not at its resync.
	if got := pvc.Annotations[pipeline.AnnotationVolumeUID]; got != string(pv.UID) {
		t.Errorf("PVC annotation %s = %q, want the volume's UID %s", pipeline.AnnotationVolumeUID, got, pv.UID)
	}

	if len(p.Status.Steps) != len(p.Spec.Steps) {
		t.Fatalf("status.steps = %+v", p.Status.Steps)
	}
	port := strconv.Itoa(int(p.Spec.ListenPort))
	serviceOf := func(i int) string {
		return p.Status.Steps[(i+len(p.Spec.Steps))%len(p.Spec.Steps)].ServiceName
	}
	for i, s := range p.Spec.Steps {
		st := p.Status.Steps[i]
		if st.Model != s.Model || st.DeploymentName != stepName(p.Name, s.Model) || st.ServiceName != st.DeploymentName {
			t.Errorf("status.steps[%d] = %+v", i, st)
		}
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, st.DeploymentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedBy(t, d, p)
		// The pods carry only labels the manager derives (issue 35); the
		// author's strings are annotations.
		wantLabels := map[string]string{
			"step": strconv.Itoa(i + 1), "distri-infer.ndsl.cn/step": st.DeploymentName,
			controller.ManagedByLabel: controller.ManagedByValue,
		}
		for k, v := range wantLabels {
			if d.Labels[k] != v || d.Spec.Template.Labels[k] != v {
				t.Errorf("Deployment %s label %s = %q (pods %q), want %q", d.Name, k, d.Labels[k], d.Spec.Template.Labels[k], v)
			}
		}
		if d.Labels["pipeline"] != p.Name {
			t.Errorf("Deployment %s label pipeline = %q, want %q", d.Name, d.Labels["pipeline"], p.Name)
		}
		for _, k := range []string{"pipeline", "app.kubernetes.io/name"} {
			if v, ok := d.Spec.Template.Labels[k]; ok {
				t.Errorf("the pods of Deployment %s carry the author's %s=%s", d.Name, k, v)
			}
		}
		if a := d.Spec.Template.Annotations; a["distri-infer.ndsl.cn/pipeline"] != p.Name || a["distri-infer.ndsl.cn/model"] != s.Model {
			t.Errorf("the pods of Deployment %s are annotated %v, want the pipeline %s and model %s", d.Name, a, p.Name, s.Model)
		}
		// Selected by the one label only this manager writes.
		wantSelector := map[string]string{"distri-infer.ndsl.cn/step": st.DeploymentName}
		if fmt.Sprint(d.Spec.Selector.MatchLabels) != fmt.Sprint(wantSelector) || len(d.Spec.Selector.MatchExpressions) != 0 {
			t.Errorf("Deployment %s selector = %+v, want %v", d.Name, d.Spec.Selector, wantSelector)
		}
		// Unset replicas are left to others, and the API server's default 1.
		if s.Replicas != nil && ptr.Deref(d.Spec.Replicas, -1) != *s.Replicas {
			t.Errorf("Deployment %s replicas = %d, want %d", d.Name, ptr.Deref(d.Spec.Replicas, -1), *s.Replicas)
		}
		if st.Replicas != ptr.Deref(d.Spec.Replicas, -1) {
			t.Errorf("status.steps[%d].replicas = %d, the Deployment has %d", i, st.Replicas, ptr.Deref(d.Spec.Replicas, -1))
		}
		pod := d.Spec.Template.Spec
		nodes := []string{}
		if s.Location != "" {
			nodes = append(nodes, s.Location)
		}
		nodes = append(nodes, s.Locations...)
		terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if expr := terms[0].MatchExpressions[0]; expr.Key != "kubernetes.io/hostname" || expr.Operator != corev1.NodeSelectorOpIn ||
			strings.Join(expr.Values, ",") != strings.Join(nodes, ",") {
			t.Errorf("Deployment %s node affinity = %+v, want hostname In %v", d.Name, terms, nodes)
		}
		c := pod.Containers[0]
		if want, err := reference.ParseNormalizedNamed(s.Image); err != nil || c.Image != want.String() {
			t.Errorf("Deployment %s image = %q", d.Name, c.Image)
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/data" ||
			pod.Volumes[0].PersistentVolumeClaim == nil || pod.Volumes[0].PersistentVolumeClaim.ClaimName != pvc.Name {
			t.Errorf("Deployment %s mounts %+v volumes %+v, want the claim at /data", d.Name, c.VolumeMounts, pod.Volumes)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		wantEnv := map[string]string{
			"MODEL_PATH": "/data/" + s.Model, "LISTEN_PORT": port,
			"DST": fmt.Sprintf("%s.%s.svc:%s", serviceOf(i+1), namespace, port),
		}
		if i == 0 {
			wantEnv["BEGIN"] = "true"
		}
		if fmt.Sprint(env) != fmt.Sprint(wantEnv) {
			t.Errorf("Deployment %s env = %v, want %v", d.Name, env, wantEnv)
		}
		var wantArgs []string
		for k, v := range s.Args {
			wantArgs = append(wantArgs, "--"+k+"="+v)
		}
		sort.Strings(wantArgs)
		if strings.Join(c.Args, " ") != strings.Join(wantArgs, " ") {
			t.Errorf("Deployment %s args = %q, want %q", d.Name, c.Args, wantArgs)
		}

		svc, err := kube.CoreV1().Services(namespace).Get(ctx, st.ServiceName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedBy(t, svc, p)
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != p.Spec.ListenPort || svc.Spec.Ports[0].TargetPort.IntValue() != int(p.Spec.ListenPort) {
			t.Errorf("Service %s ports = %+v, want %d", svc.Name, svc.Spec.Ports, p.Spec.ListenPort)
		}
		if fmt.Sprint(svc.Spec.Selector) != fmt.Sprint(wantSelector) || svc.Labels["step"] != wantLabels["step"] {
			t.Errorf("Service %s selector %v, want %v, Deployment %s's pods", svc.Name, svc.Spec.Selector, wantSelector, d.Name)
		}
		for what, l := range map[string]map[string]string{
			"Deployment " + d.Name: d.Labels, "the pods of " + d.Name: d.Spec.Template.Labels, "Service " + svc.Name: svc.Labels,
			"PersistentVolume " + pv.Name: pv.Labels, "PersistentVolumeClaim " + pvc.Name: pvc.Labels,
		} {
			if v, ok := l["app.kubernetes.io/instance"]; ok {
				t.Errorf("%s carries app.kubernetes.io/instance=%s, Helm's and Argo CD's label", what, v)
			}
		}
	}
}

// deploymentsOf lists the Deployments labelled with the Pipeline's name.
func deploymentsOf(ctx context.Context, kube kubernetes.Interface, name string) ([]appsv1.Deployment, error) {
	list, err := kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{pipeline.LabelPipeline: name}).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
