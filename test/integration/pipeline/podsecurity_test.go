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
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// enforceLabel is PodSecurity admission's namespace label.
const enforceLabel = pipeline.PodSecurityEnforceLabel

// A step's pods carry no API token and pass PodSecurity: in a namespace
// enforcing restricted and in one enforcing baseline, a pod made from the
// step Deployment's template is admitted by the API server's PodSecurity
// admission (issue 25, item 2).
func TestStepPodsPassPodSecurity(t *testing.T) {
	e := setup(t, nil)
	for _, level := range []string{"restricted", "baseline"} {
		t.Run(level, func(t *testing.T) {
			ns := podSecurityNamespace(t, e, level)
			p := e.create(newPipeline("pss-"+level, ns, step("m", "pss-node")))
			d := e.waitStepDeployment(ns, stepName(p.Name, "m"), func(*appsv1.Deployment) bool { return true })
			checkNoToken(t, d)
			checkSecurityContext(t, d, level == "restricted")
			pod := dryRunStepPod(t, e, d)
			for _, v := range pod.Spec.Volumes {
				if v.Projected != nil || strings.HasPrefix(v.Name, "kube-api-access-") {
					t.Errorf("pod has service account token volume %s", v.Name)
				}
			}
		})
	}
}

// Labelling a Pipeline's namespace restricted after its steps exist turns
// the steps' pods restricted, and removing the label turns them back: the
// namespace's enforce label is watched.
func TestStepPodsFollowTheNamespaceEnforceLabel(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, e.kube)
	p := e.create(newPipeline("pss-relabel", ns, step("m", "pss-node")))
	d := e.waitStepDeployment(ns, stepName(p.Name, "m"), func(*appsv1.Deployment) bool { return true })
	// Unlabelled, the step keeps the image's user: the seed's nginx runs as root.
	checkSecurityContext(t, d, false)

	patch := []byte(`{"metadata":{"labels":{"` + enforceLabel + `":"restricted"}}}`)
	if _, err := e.kube.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d = e.waitStepDeployment(ns, d.Name, func(d *appsv1.Deployment) bool {
		sc := d.Spec.Template.Spec.SecurityContext
		return sc != nil && ptr.Deref(sc.RunAsNonRoot, false)
	})
	checkSecurityContext(t, d, true)
	dryRunStepPod(t, e, d)

	// Unlabelled again, the step goes back to the image's user: the fields
	// only restricted sets were the manager's alone, so apply drops them.
	patch = []byte(`{"metadata":{"labels":{"` + enforceLabel + `":null}}}`)
	if _, err := e.kube.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d = e.waitStepDeployment(ns, d.Name, func(d *appsv1.Deployment) bool {
		sc := d.Spec.Template.Spec.SecurityContext
		return sc != nil && sc.RunAsNonRoot == nil
	})
	checkSecurityContext(t, d, false)
}

// --pipeline-pod-security=restricted makes the step pods restricted in a
// namespace that enforces nothing.
func TestPodSecurityFlagRestricted(t *testing.T) {
	e := setup(t, func(o *options.Options) { o.Pipeline.PodSecurity = pipeline.PodSecurityRestricted })
	ns := framework.CreateNamespace(t, e.kube)
	p := e.create(newPipeline("pss-flag", ns, step("m", "pss-node")))
	d := e.waitStepDeployment(ns, stepName(p.Name, "m"), func(*appsv1.Deployment) bool { return true })
	checkNoToken(t, d)
	checkSecurityContext(t, d, true)
}

// Pods the API server refuses never exist, so their Deployment's
// ReplicaFailure condition is the only place that says why: StepsReady
// repeats it. A quota of no pods stands in for any admission refusal.
func TestStepsReadySaysWhyPodsAreRefused(t *testing.T) {
	e := setup(t, nil)
	ns := framework.CreateNamespace(t, e.kube)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if _, err := e.kube.CoreV1().ResourceQuotas(ns).Create(context.Background(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := e.create(newPipeline("pss-refused", ns, step("m", "pss-node")))
	e.waitCondition(p.Name, pipelinev1beta1.ConditionStepsReady, metav1.ConditionFalse, "0/1 replicas ready: pods")
	got := conditionOf(e.get(p.Name), pipelinev1beta1.ConditionStepsReady).Message
	if !strings.Contains(got, "exceeded quota") {
		t.Errorf("StepsReady message %q does not say the quota refused the pods", got)
	}
}

// podSecurityNamespace is a new namespace enforcing level.
func podSecurityNamespace(t *testing.T, e *env, level string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "pss-" + level + "-",
		Labels:       map[string]string{enforceLabel: level},
	}}
	created, err := e.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	return created.Name
}

// waitStepDeployment waits for the Deployment ns/name to satisfy cond.
func (e *env) waitStepDeployment(ns, name string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	e.t.Helper()
	var d *appsv1.Deployment
	framework.Eventually(e.t, timeout, "Deployment "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		var err error
		d, err = e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(d), err
	})
	return d
}

func checkNoToken(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("pod template automountServiceAccountToken = %v, want false", ptrString(a))
	}
}

// checkSecurityContext checks the template's security context: always
// seccomp RuntimeDefault and no privilege escalation; with restricted also
// runAsNonRoot and every capability dropped, and otherwise neither, so an
// image running as root still runs.
func checkSecurityContext(t *testing.T, d *appsv1.Deployment, restricted bool) {
	t.Helper()
	spec := d.Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want seccompProfile RuntimeDefault", psc)
	}
	if psc != nil && ptr.Deref(psc.RunAsNonRoot, false) != restricted {
		t.Errorf("pod securityContext.runAsNonRoot = %v, want %v", ptrString(psc.RunAsNonRoot), restricted)
	}
	if psc != nil && psc.RunAsUser != nil {
		t.Errorf("pod securityContext.runAsUser = %d, want unset (the image's user)", *psc.RunAsUser)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	csc := spec.Containers[0].SecurityContext
	if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext = %+v, want allowPrivilegeEscalation false", csc)
		return
	}
	dropsAll := csc.Capabilities != nil && len(csc.Capabilities.Drop) == 1 && csc.Capabilities.Drop[0] == "ALL"
	if dropsAll != restricted {
		t.Errorf("container capabilities = %+v, want drop ALL: %v", csc.Capabilities, restricted)
	}
}

// dryRunStepPod creates, dry-run, a pod of the Deployment's template in its
// namespace, so that PodSecurity admission judges it, and returns what the
// API server would have stored.
func dryRunStepPod(t *testing.T, e *env, d *appsv1.Deployment) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-", Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	created, err := e.kube.CoreV1().Pods(d.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("creating a pod of step Deployment %s (dry run): %v", d.Name, err)
	}
	return created
}

func ptrString(b *bool) string {
	if b == nil {
		return "unset"
	}
	if *b {
		return "true"
	}
	return "false"
}
