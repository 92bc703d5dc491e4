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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/ingress"
	integration "github.com/ndsl/controller-manager/test/integration/framework"
)

// TestSamplesConverge applies the App sample, both Pipeline samples (pinned
// to the cluster's nodes) and an annotated Service, and waits until each has
// its children, its pods are Ready on the nodes, and it reports Ready. A
// Pipeline sample left pinned to nodes that do not exist says so.
func TestSamplesConverge(t *testing.T) {
	if launcher != nil {
		procs := startManagers(t, 2, defaultLease.args()...)
		leader, _ := waitForLeader(t, procs...)
		t.Logf("%s leads", leader.Name)
	} else {
		eventually(t, leaderTimeout, "the in-cluster manager to hold the Lease", func(ctx context.Context) (bool, error) {
			holder, err := cluster.LeaseHolder(ctx)
			return holder != "", err
		})
	}
	ns := newNamespace(t)

	t.Run("App sample", func(t *testing.T) {
		t.Parallel()
		var sample appv1beta1.App
		integration.LoadManifest(t, "samples/app.yaml", &sample)
		if !cluster.FakeNodes {
			// A real kubelet pulls the sample's nginx:latest on every start
			// (an App has no pull policy): run the image the nodes have.
			sample.Spec.Image = workloadImage()
		}
		created := createApp(t, ns, &sample)
		app := waitAppReady(t, ns, created.Name, convergeTimeout)
		checkAppChildren(t, ns, app)
		if app.Status.ReadyReplicas != ptr.Deref(sample.Spec.Replicas, 1) {
			t.Errorf("status.readyReplicas = %d, want %d", app.Status.ReadyReplicas, ptr.Deref(sample.Spec.Replicas, 1))
		}
	})

	t.Run("Pipeline v1beta1 sample on the cluster's nodes", func(t *testing.T) {
		t.Parallel()
		var sample pipelinev1beta1.Pipeline
		integration.LoadManifest(t, "samples/pipeline-v1beta1.yaml", &sample)
		sample.Name += "-v1beta1-" + suffix(ns)
		onNodes := nodeMapping()
		for i := range sample.Spec.Steps {
			sample.Spec.Steps[i].Location = onNodes(sample.Spec.Steps[i].Location)
			if !cluster.FakeNodes {
				sample.Spec.Steps[i].Image = workloadImage()
			}
		}
		created := createPipeline(t, &sample)
		deletePipelineAtEnd(t, created.Name)
		checkPipelineConverges(t, created.Name)
	})

	t.Run("Pipeline v1 sample on the cluster's nodes", func(t *testing.T) {
		t.Parallel()
		var v1Sample pipelinev1.Pipeline
		integration.LoadManifest(t, "samples/pipeline-v1.yaml", &v1Sample)
		v1Sample.Name += "-v1-" + suffix(ns)
		onNodes := nodeMapping()
		for i := range v1Sample.Spec.Steps {
			for j, n := range v1Sample.Spec.Steps[i].NodeNames {
				v1Sample.Spec.Steps[i].NodeNames[j] = onNodes(n)
			}
			if !cluster.FakeNodes {
				v1Sample.Spec.Steps[i].Image = workloadImage()
			}
		}
		// At v1, the stored version: no conversion on the way in.
		created, err := cluster.Typed.PipelineV1().Pipelines().Create(context.Background(), &v1Sample, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating the v1 sample: %v", err)
		}
		deletePipelineAtEnd(t, created.Name)
		p := checkPipelineConverges(t, created.Name)
		for _, s := range p.Status.Steps {
			if s.Replicas != 2 {
				t.Errorf("step %s: %d replicas, want the sample's 2", s.Model, s.Replicas)
			}
		}
	})

	t.Run("Pipeline sample naming missing nodes", func(t *testing.T) {
		t.Parallel()
		var sample pipelinev1beta1.Pipeline
		integration.LoadManifest(t, "samples/pipeline-v1beta1.yaml", &sample)
		sample.Name += "-missing-nodes-" + suffix(ns)
		missing := sample.Spec.Steps[0].Location
		created := createPipeline(t, &sample)
		deletePipelineAtEnd(t, created.Name)
		p := waitPipeline(t, created.Name, "StepsReady=False naming the missing node "+missing, func(p *pipelinev1beta1.Pipeline) bool {
			return pipelineCondition(p, pipelinev1beta1.ConditionStepsReady, metav1.ConditionFalse, "missing node(s) "+missing)
		})
		t.Logf("%s", describePipeline(p))
		if !pipelineCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionFalse, "") {
			t.Errorf("Ready is not False: %s", describePipeline(p))
		}
		for _, s := range p.Status.Steps {
			if _, err := cluster.Kube.AppsV1().Deployments(pipelineNamespace(p)).Get(context.Background(), s.DeploymentName, metav1.GetOptions{}); err != nil {
				t.Errorf("step %s: its Deployment should exist (pending on the missing node): %v", s.Model, err)
			}
		}
	})

	t.Run("Service annotated ingress/http", func(t *testing.T) {
		t.Parallel()
		svc := annotatedService("web")
		created, err := cluster.Kube.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitIngress(t, ns, created, convergeTimeout)
	})
}

// suffix is a short unique string from the test namespace's generated name,
// for names of cluster-scoped objects.
func suffix(ns string) string {
	return ns[strings.LastIndex(ns, "-")+1:]
}

// nodeMapping maps the node names a sample uses, in order of first use, to
// the cluster's nodes.
func nodeMapping() func(string) string {
	mapped := map[string]string{}
	return func(name string) string {
		if n, ok := mapped[name]; ok {
			return n
		}
		mapped[name] = cluster.Node(len(mapped))
		return mapped[name]
	}
}

// annotatedService is a ClusterIP Service asking for an Ingress.
func annotatedService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{ingress.AnnotationEnabled: "true"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// waitIngress waits for the Ingress of an annotated Service and checks it
// routes / to the Service's port and is controlled by the Service.
func waitIngress(t testing.TB, ns string, svc *corev1.Service, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "Ingress "+ns+"/"+svc.Name, func(ctx context.Context) (bool, error) {
		_, err := cluster.Kube.NetworkingV1().Ingresses(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		return err == nil, err
	})
	ing, err := cluster.Kube.NetworkingV1().Ingresses(ns).Get(context.Background(), svc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controlledBy(t, ing, "Service", svc.UID)
	rules := ing.Spec.Rules
	if len(rules) != 1 || rules[0].HTTP == nil || len(rules[0].HTTP.Paths) != 1 ||
		rules[0].HTTP.Paths[0].Path != "/" || rules[0].HTTP.Paths[0].Backend.Service == nil ||
		rules[0].HTTP.Paths[0].Backend.Service.Name != svc.Name ||
		rules[0].HTTP.Paths[0].Backend.Service.Port.Number != svc.Spec.Ports[0].Port {
		t.Errorf("Ingress %s rules = %+v, want / to Service %s port %d", ing.Name, rules, svc.Name, svc.Spec.Ports[0].Port)
	}
}

// deletePipelineAtEnd deletes the (cluster-scoped) Pipeline when the test
// ends; the garbage collector removes its children.
func deletePipelineAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		_ = cluster.Typed.PipelineV1beta1().Pipelines().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// samplesMountable reports whether the steps' pods can mount the samples'
// NFS volumes: on kwok nodes, which mount nothing, or with the NFS CSI
// driver stand-in (test/e2e/images/nfs-stand-in) that make e2e-kind deploys.
func samplesMountable() bool {
	return cluster.FakeNodes || os.Getenv("E2E_NFS_STAND_IN") == "true"
}

// checkPipelineConverges waits until the Pipeline's storage is bound and its
// steps' pods are Ready on the nodes they are pinned to, and it reports
// Ready, then checks its children. Where the samples' NFS share cannot be
// mounted (samplesMountable), it checks all but readiness, and that the pods
// are scheduled on the nodes the steps name.
func checkPipelineConverges(t *testing.T, name string) *pipelinev1beta1.Pipeline {
	t.Helper()
	var p *pipelinev1beta1.Pipeline
	if samplesMountable() {
		p = waitPipeline(t, name, "Ready=True", func(p *pipelinev1beta1.Pipeline) bool {
			return pipelineCondition(p, pipelinev1beta1.ConditionReady, metav1.ConditionTrue, "")
		})
	} else {
		t.Logf("these nodes cannot mount the samples' NFS share: checking storage, children and scheduling, not readiness")
		p = waitPipeline(t, name, "StorageReady=True and every step's Deployment", func(p *pipelinev1beta1.Pipeline) bool {
			return pipelineCondition(p, pipelinev1beta1.ConditionStorageReady, metav1.ConditionTrue, "") &&
				!strings.Contains(conditionMessage(p, pipelinev1beta1.ConditionStepsReady), "does not exist")
		})
	}
	t.Logf("%s", describePipeline(p))
	ctx := context.Background()
	ns := pipelineNamespace(p)

	s := p.Status.Storage
	if s == nil || s.PVPhase != corev1.VolumeBound || s.PVCPhase != corev1.ClaimBound {
		t.Errorf("storage = %+v, want PV and PVC Bound", s)
	} else {
		if pv, err := cluster.Kube.CoreV1().PersistentVolumes().Get(ctx, s.PVName, metav1.GetOptions{}); err != nil {
			t.Error(err)
		} else {
			controlledBy(t, pv, "Pipeline", p.UID)
		}
		if pvc, err := cluster.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, s.PVCName, metav1.GetOptions{}); err != nil {
			t.Error(err)
		} else {
			controlledBy(t, pvc, "Pipeline", p.UID)
		}
	}

	if len(p.Status.Steps) != len(p.Spec.Steps) {
		t.Fatalf("status.steps = %+v, want %d steps", p.Status.Steps, len(p.Spec.Steps))
	}
	for i, step := range p.Spec.Steps {
		st := p.Status.Steps[i]
		d, err := cluster.Kube.AppsV1().Deployments(ns).Get(ctx, st.DeploymentName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("step %s: %v", step.Model, err)
			continue
		}
		controlledBy(t, d, "Pipeline", p.UID)
		svc, err := cluster.Kube.CoreV1().Services(ns).Get(ctx, st.ServiceName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("step %s: %v", step.Model, err)
		} else {
			controlledBy(t, svc, "Pipeline", p.UID)
		}
		nodes := append([]string{}, step.Locations...)
		if step.Location != "" {
			nodes = append(nodes, step.Location)
		}
		if !samplesMountable() {
			checkPodsScheduled(t, ns, d.Spec.Selector, ptr.Deref(step.Replicas, 1), nodes)
			continue
		}
		if st.ReadyReplicas != st.Replicas || st.Replicas != ptr.Deref(step.Replicas, 1) {
			t.Errorf("step %s: %d/%d ready, want %d", step.Model, st.ReadyReplicas, st.Replicas, ptr.Deref(step.Replicas, 1))
		}
		checkPodsReady(t, ns, d.Spec.Selector, ptr.Deref(step.Replicas, 1), nodes)
	}
	return p
}

// checkPodsScheduled waits until want pods match selector, each bound by
// the scheduler to one of nodes (the step's pinning), and logs how far they
// got: without the samples' NFS server they wait on their volume.
func checkPodsScheduled(t *testing.T, ns string, selector *metav1.LabelSelector, want int32, nodes []string) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	eventually(t, convergeTimeout, fmt.Sprintf("%d pods of %s scheduled on %v", want, sel, nodes), func(ctx context.Context) (bool, error) {
		list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err
		}
		pods = list.Items
		var placed []string
		for _, p := range pods {
			if p.DeletionTimestamp == nil && slices.Contains(nodes, p.Spec.NodeName) {
				placed = append(placed, p.Name+"@"+p.Spec.NodeName)
			}
		}
		return int32(len(placed)) == want, fmt.Errorf("%d pods, on the pinned nodes: %v", len(pods), placed)
	})
	for _, p := range pods {
		t.Logf("pod %s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
}

// pipelineNamespace is where the Pipeline's children live.
func pipelineNamespace(p *pipelinev1beta1.Pipeline) string {
	if p.Spec.Namespace != "" {
		return p.Spec.Namespace
	}
	return "pipeline" // the manager's default --pipeline-namespace
}

// waitPipeline polls the Pipeline until cond holds and returns it.
func waitPipeline(t testing.TB, name, what string, cond func(p *pipelinev1beta1.Pipeline) bool) *pipelinev1beta1.Pipeline {
	t.Helper()
	var p *pipelinev1beta1.Pipeline
	eventually(t, convergeTimeout, "Pipeline "+name+": "+what, func(ctx context.Context) (bool, error) {
		var err error
		if p, err = cluster.Typed.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if !cond(p) {
			return false, fmt.Errorf("%s", describePipeline(p))
		}
		return true, nil
	})
	return p
}

// pipelineCondition reports whether the status is of the current generation
// and has the condition with status and a message containing msg.
func pipelineCondition(p *pipelinev1beta1.Pipeline, typ string, status metav1.ConditionStatus, msg string) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	return p.Status.ObservedGeneration == p.Generation && c != nil && c.Status == status && strings.Contains(c.Message, msg)
}

func conditionMessage(p *pipelinev1beta1.Pipeline, typ string) string {
	if c := meta.FindStatusCondition(p.Status.Conditions, typ); c != nil {
		return c.Message
	}
	return "does not exist"
}

// describePipeline is a one-line account of a Pipeline's status.
func describePipeline(p *pipelinev1beta1.Pipeline) string {
	var parts []string
	for _, c := range p.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("Pipeline %s generation %d observed %d: %s", p.Name, p.Generation, p.Status.ObservedGeneration, strings.Join(parts, " "))
}
