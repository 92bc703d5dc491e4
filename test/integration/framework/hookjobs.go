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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/crds"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// RunHookJobs stands in for the Job controller and the kubelet, which do
// not run in the local control plane, for the chart's CRD hook Jobs: it runs each Job's args
// through crds.Run as the Job's ServiceAccount (impersonated, so the
// hook's ClusterRole is what is tested), with its ConfigMap volume as a
// directory, and then marks the Job complete (or failed), which is what
// helm waits for. It returns a function that stops it.
func RunHookJobs(t *testing.T, cp *controlplane.ControlPlane) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		done := map[types.UID]bool{}
		for ctx.Err() == nil {
			jobs, err := cp.Client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=crds"})
			if err == nil {
				for i := range jobs.Items {
					if job := &jobs.Items[i]; !done[job.UID] {
						done[job.UID] = true
						runHookJob(ctx, t, cp, job)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func runHookJob(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, job *batchv1.Job) {
	pod := job.Spec.Template.Spec
	args := pod.Containers[0].Args
	if len(args) == 0 || args[0] != "crds" {
		t.Errorf("hook Job %s/%s runs %q, want the crds subcommand", job.Namespace, job.Name, args)
		return
	}
	args = append([]string(nil), args[1:]...)
	for _, m := range pod.Containers[0].VolumeMounts {
		dir := t.TempDir()
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, err := cp.Client.CoreV1().ConfigMaps(job.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("hook Job %s: its ConfigMap: %v", job.Name, err)
				return
			}
			for k, data := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, a := range args {
			args[i] = strings.Replace(a, "="+m.MountPath, "="+dir, 1)
		}
	}
	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + job.Namespace + ":" + pod.ServiceAccountName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + job.Namespace, "system:authenticated"},
	}
	_, runCtx := ktesting.NewTestContext(t)
	err := crds.Run(runCtx, sa, args)
	now := metav1.Now()
	job.Status.StartTime = &now
	if err != nil {
		t.Errorf("hook Job %s/%s (crds %s): %v", job.Namespace, job.Name, strings.Join(args, " "), err)
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "Failed", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "Failed", Message: err.Error(), LastTransitionTime: now},
		}
	} else {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	}
	if _, err := cp.Client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Errorf("marking hook Job %s/%s done: %v", job.Namespace, job.Name, err)
	}
}
