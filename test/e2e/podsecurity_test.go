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
	"encoding/json"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	integration "github.com/ndsl/controller-manager/test/integration/framework"
)

// TestSeedPipelineUnderRestrictedPodSecurity labels the manager's Pipeline
// namespace pod-security.kubernetes.io/enforce=restricted and runs the seed
// Pipeline there: the manager builds restricted step pods for it (no token,
// runAsNonRoot, no privilege escalation, every capability dropped, seccomp
// RuntimeDefault), PodSecurity admission lets the ReplicaSets create them,
// and, on real nodes with a non-root image, the kubelet runs them Ready.
func TestSeedPipelineUnderRestrictedPodSecurity(t *testing.T) {
	image := ""
	if !cluster.FakeNodes {
		// runAsNonRoot needs an image with a non-root USER; the samples'
		// nginx and the root web stand-in would be refused by the kubelet.
		if image = os.Getenv("E2E_NONROOT_WORKLOAD_IMAGE"); image == "" {
			t.Skip("E2E_NONROOT_WORKLOAD_IMAGE is unset: no non-root image for restricted step pods on these nodes")
		}
	}
	if launcher != nil {
		procs := startManagers(t, 1, defaultLease.args()...)
		waitForLeader(t, procs...)
	}
	const ns = "pipeline" // the manager's default --pipeline-namespace, the only one allowed by default
	enforceRestricted(t, ns)

	var sample pipelinev1beta1.Pipeline
	integration.LoadManifest(t, "samples/pipeline-v1beta1.yaml", &sample)
	sample.Name += "-restricted-" + rand.String(5)
	onNodes := nodeMapping()
	for i := range sample.Spec.Steps {
		sample.Spec.Steps[i].Location = onNodes(sample.Spec.Steps[i].Location)
		if image != "" {
			sample.Spec.Steps[i].Image = image
		}
	}
	created := createPipeline(t, &sample)
	deletePipelineAtEnd(t, created.Name)
	// Ready=True: every step's pods were admitted under restricted and are
	// Ready (on kind: running as the image's non-root user).
	p := checkPipelineConverges(t, created.Name)

	ctx := context.Background()
	for _, st := range p.Status.Steps {
		d, err := cluster.Kube.AppsV1().Deployments(ns).Get(ctx, st.DeploymentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := d.Spec.Template.Spec
		if !ptr.Equal(spec.AutomountServiceAccountToken, ptr.To(false)) {
			t.Errorf("step %s: automountServiceAccountToken = %v, want false", st.Model, spec.AutomountServiceAccountToken)
		}
		if spec.SecurityContext == nil || !ptr.Deref(spec.SecurityContext.RunAsNonRoot, false) {
			t.Errorf("step %s: pod securityContext = %+v, want runAsNonRoot", st.Model, spec.SecurityContext)
		}
		pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: pipeline.LabelStepChild + "=" + st.DeploymentName})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Errorf("step %s: no pods", st.Model)
		}
		for _, pod := range pods.Items {
			// With ServiceAccount admission on (kind), a pod that mounts
			// its token gets a kube-api-access-* projected volume.
			for _, v := range pod.Spec.Volumes {
				if strings.HasPrefix(v.Name, "kube-api-access-") || (v.Projected != nil && hasTokenSource(v.Projected)) {
					t.Errorf("pod %s has service account token volume %s", pod.Name, v.Name)
				}
			}
		}
	}
}

func hasTokenSource(p *corev1.ProjectedVolumeSource) bool {
	for _, s := range p.Sources {
		if s.ServiceAccountToken != nil {
			return true
		}
	}
	return false
}

// enforceRestricted labels namespace (creating it if missing) to enforce
// PodSecurity restricted until the test ends, then puts the label back.
func enforceRestricted(t *testing.T, namespace string) {
	t.Helper()
	ctx := context.Background()
	nsClient := cluster.Kube.CoreV1().Namespaces()
	var previous *string
	ns, err := nsClient.Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = nsClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	case err == nil:
		if v, ok := ns.Labels[pipeline.PodSecurityEnforceLabel]; ok {
			previous = &v
		}
	}
	if err != nil {
		t.Fatalf("namespace %s: %v", namespace, err)
	}
	setEnforce := func(value *string) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{pipeline.PodSecurityEnforceLabel: value}}})
		if err != nil {
			return err
		}
		_, err = nsClient.Patch(context.Background(), namespace, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := setEnforce(ptr.To("restricted")); err != nil {
		t.Fatalf("labelling namespace %s restricted: %v", namespace, err)
	}
	t.Cleanup(func() {
		if err := setEnforce(previous); err != nil {
			t.Errorf("restoring namespace %s's enforce label: %v", namespace, err)
		}
	})
}
