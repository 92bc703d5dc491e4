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

package tenancy

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/pipeline"
)

// Issue 35, "A step's pods mount a claim the Pipeline does not control":
// team B claims, in the shared namespace, the name team A's Pipeline will
// use for its storage, then A creates the Pipeline. A's step pods must
// mount only a claim A's Pipeline controls, bound to a volume it controls,
// and no claim of B's may be bound to A's volume.
func TestPreClaimedStorage(t *testing.T) {
	requireSuite(t)
	t.Run("claim with the storage name", func(t *testing.T) {
		preClaimedStorage(t, "")
	})
	t.Run("claim with the storage name bound to a volume of B's choosing", func(t *testing.T) {
		// Any unbound volume the attacker can see: here a hostPath one,
		// which sidesteps the NFS allowlist.
		pv, err := admin.kube.CoreV1().PersistentVolumes().Create(context.Background(), &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("spare")},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/spare"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		preClaimedStorage(t, pv.Name)
	})
}

func preClaimedStorage(t *testing.T, volumeName string) {
	t.Helper()
	ctx := context.Background()
	victim := newPipeline(uniqueName("victim"), "", nfsExport+"/team-a", step("model"))
	// A Pipeline's spec is public to every author: B computes the name.
	stored := &pipelinev1.Pipeline{}
	if err := conversion.V1beta1ToV1(victim, stored); err != nil {
		t.Fatal(err)
	}
	_, claim, _, _ := pipeline.DesiredChildren(stored, sharedNamespace)
	squat := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			StorageClassName: ptr.To(""),
			VolumeName:       volumeName,
		},
	}
	squat, err := teamB.kube.CoreV1().PersistentVolumeClaims(sharedNamespace).Create(ctx, squat, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("team B pre-creating claim %s: %v", claim.Name, err)
	}
	victim = createPipeline(t, teamA, victim)

	var syncedBefore int32 = -1
	harmlessOnceObserved(t, func(ctx context.Context) (bool, error) {
		// Observed, and the PV binder has judged every volume of A's.
		if ok, err := pipelineObserved(ctx, victim.Name); !ok || err != nil {
			return false, err
		}
		volumes, err := volumesControlledBy(ctx, victim.UID)
		if err != nil {
			return false, err
		}
		for _, pv := range volumes {
			if pv.Status.Phase == "" || pv.Status.Phase == corev1.VolumePending {
				return false, nil
			}
		}
		if volumeName != "" {
			return true, nil // B's claim is bound to B's volume already
		}
		// B's unbound claim takes a volume when the binder syncs it (on a
		// change or its periodic resync): once more after A's was observed.
		n, err := failedBindings(ctx, squat)
		switch {
		case err != nil:
			return false, err
		case syncedBefore < 0:
			syncedBefore = n
			return false, nil
		}
		return n > syncedBefore, nil
	}, func(ctx context.Context) error { return mountsOnlyOwnStorage(ctx, sharedNamespace, victim.UID) })
}

// failedBindings is how often the PV binder found no volume for claim: each
// sync of a claim with no storage class and no volume says so in an Event
// (aggregated: its count grows).
func failedBindings(ctx context.Context, claim *corev1.PersistentVolumeClaim) (int32, error) {
	events, err := admin.kube.CoreV1().Events(claim.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(claim.UID) + ",reason=FailedBinding",
	})
	if err != nil {
		return 0, err
	}
	var n int32
	for _, ev := range events.Items {
		n += max(ev.Count, 1)
	}
	return n, nil
}

// mountsOnlyOwnStorage reports a step Deployment of the Pipeline uid that
// mounts a claim, or a volume through it, the Pipeline does not control,
// and a volume of the Pipeline bound to a claim it does not control.
func mountsOnlyOwnStorage(ctx context.Context, ns string, uid types.UID) error {
	deployments, err := admin.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for _, d := range deployments.Items {
		if !controlledBy(&d, uid) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			claim, err := admin.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			if err != nil {
				continue // not there (yet): nothing mounted
			}
			if !controlledBy(claim, uid) {
				return fmt.Errorf("step Deployment %s mounts claim %s, which its Pipeline does not control (controller %v)",
					d.Name, claim.Name, metav1.GetControllerOf(claim))
			}
			if claim.Spec.VolumeName == "" {
				continue
			}
			pv, err := admin.kube.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
			if err == nil && !controlledBy(pv, uid) {
				return fmt.Errorf("step Deployment %s mounts volume %s through claim %s; its Pipeline does not control the volume",
					d.Name, pv.Name, claim.Name)
			}
		}
	}
	volumes, err := volumesControlledBy(ctx, uid)
	if err != nil {
		return nil
	}
	for _, pv := range volumes {
		ref := pv.Spec.ClaimRef
		if pv.Status.Phase != corev1.VolumeBound || ref == nil {
			continue
		}
		claim, err := admin.kube.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err == nil && claim.Spec.VolumeName == pv.Name && !controlledBy(claim, uid) {
			return fmt.Errorf("the Pipeline's volume %s is bound to claim %s/%s, which the Pipeline does not control",
				pv.Name, claim.Namespace, claim.Name)
		}
	}
	return nil
}

func volumesControlledBy(ctx context.Context, uid types.UID) ([]corev1.PersistentVolume, error) {
	list, err := admin.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.PersistentVolume
	for _, pv := range list.Items {
		if controlledBy(&pv, uid) {
			out = append(out, pv)
		}
	}
	return out, nil
}

// Issue 35, "Any Pipeline author acts on every Pipeline": team B may not
// re-image, move or delete team A's Pipeline, which runs in A's namespace.
func TestOtherTeamsPipeline(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	victimOf := func(t *testing.T) (*pipelinev1beta1.Pipeline, string) {
		nsA := teamNamespace(t, teamA)
		return createPipeline(t, teamA, newPipeline(uniqueName("victim"), nsA, nfsExport+"/team-a", step("model"))), nsA
	}
	// update applies change to A's Pipeline as B, retrying conflicts with
	// the controller's status writes, and returns the API's answer.
	update := func(name string, change func(*pipelinev1beta1.Pipeline)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := teamB.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(p)
			_, err = teamB.crd.PipelineV1beta1().Pipelines().Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
	}
	unchanged := func(t *testing.T, before *pipelinev1beta1.Pipeline) {
		t.Helper()
		after, err := admin.crd.PipelineV1beta1().Pipelines().Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("team A's Pipeline: %v", err)
		}
		if after.DeletionTimestamp != nil || after.Spec.Namespace != before.Spec.Namespace || after.Spec.Steps[0].Image != before.Spec.Steps[0].Image {
			t.Errorf("team A's Pipeline changed: namespace %q image %q deleting %v", after.Spec.Namespace, after.Spec.Steps[0].Image, after.DeletionTimestamp)
		}
	}

	t.Run("re-image", func(t *testing.T) {
		victim, _ := victimOf(t)
		refused(t, "team B re-imaging team A's Pipeline", update(victim.Name, func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Steps[0].Image = "docker.io/library/busybox:1.36"
		}))
		unchanged(t, victim)
	})
	t.Run("move to B's namespace", func(t *testing.T) {
		victim, _ := victimOf(t)
		nsB := teamNamespace(t, teamB)
		refused(t, "team B moving team A's Pipeline to its namespace", update(victim.Name, func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Namespace = nsB
		}))
		unchanged(t, victim)
	})
	t.Run("delete", func(t *testing.T) {
		victim, _ := victimOf(t)
		refused(t, "team B deleting team A's Pipeline",
			teamB.crd.PipelineV1beta1().Pipelines().Delete(ctx, victim.Name, metav1.DeleteOptions{}))
		unchanged(t, victim)
	})
	t.Run("create in A's namespace", func(t *testing.T) {
		nsA := teamNamespace(t, teamA)
		attempt := attemptPipeline(t, teamB, newPipeline(uniqueName("intruder"), nsA, nfsExport+"/team-b", step("model")))
		if attempt != nil {
			t.Errorf("team B created Pipeline %s targeting team A's namespace %s: admitted, want refused", attempt.Name, nsA)
		}
		refusedOrHarmless(t, attempt, nsA)
	})
}

// Issue 35, "Author-chosen strings in selector labels": team A's Service
// in the shared namespace selects app.kubernetes.io/name=web; team B's
// Pipeline has a step whose model is web. B's pods must not be selected.
func TestStepLabelsSelectNoOtherService(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	selector := map[string]string{"app.kubernetes.io/name": "web"}
	svc, err := teamA.kube.CoreV1().Services(sharedNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("web")},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	attempt := attemptPipeline(t, teamB, newPipeline(uniqueName("labels"), "", nfsExport+"/team-b", step("web")))
	if attempt == nil {
		return
	}
	sel := labels.SelectorFromSet(selector)
	harmlessOnceObserved(t, func(ctx context.Context) (bool, error) { return pipelineObserved(ctx, attempt.Name) },
		func(ctx context.Context) error {
			deployments, err := admin.kube.AppsV1().Deployments(sharedNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil
			}
			for _, d := range deployments.Items {
				if controlledBy(&d, attempt.UID) && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					return fmt.Errorf("team A's Service %s selects the pods of team B's step Deployment %s (pod labels %v)",
						svc.Name, d.Name, d.Spec.Template.Labels)
				}
			}
			pods, err := admin.kube.CoreV1().Pods(sharedNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
			if err == nil && len(pods.Items) > 0 {
				return fmt.Errorf("team A's Service %s selects pod %s, which team A did not create", svc.Name, pods.Items[0].Name)
			}
			return nil
		})
}

// Issue 35, "Namespaces": "*" allows every namespace, yet a Pipeline gets
// nothing in the system's or the manager's namespace, and a Pipeline
// naming a namespace that does not exist does not make the manager create
// it (creating namespaces is opt-in).
func TestPipelineNamespaces(t *testing.T) {
	requireSuite(t)
	for _, ns := range []string{"kube-system", managerNamespace} {
		t.Run(ns, func(t *testing.T) {
			attempt := attemptPipeline(t, teamB, newPipeline(uniqueName("system"), ns, nfsExport+"/team-b", step("model")))
			refusedOrHarmless(t, attempt, ns)
		})
	}
	t.Run("missing namespace", func(t *testing.T) {
		missing := uniqueName("missing")
		attempt := attemptPipeline(t, teamB, newPipeline(uniqueName("missing"), missing, nfsExport+"/team-b", step("model")))
		if attempt == nil {
			return
		}
		harmlessOnceObserved(t, func(ctx context.Context) (bool, error) { return pipelineObserved(ctx, attempt.Name) },
			func(ctx context.Context) error {
				_, err := admin.kube.CoreV1().Namespaces().Get(ctx, missing, metav1.GetOptions{})
				if err == nil {
					return fmt.Errorf("the manager created namespace %s for team B's Pipeline", missing)
				}
				return nil
			})
	})
}

// Issue 35, "Storage": team B names an NFS share that contains team A's
// Pipeline directory, or lies inside it. No volume of B's may expose A's
// directory or a part of it.
func TestStorageOfAnotherPipeline(t *testing.T) {
	requireSuite(t)
	// victimDir creates A's Pipeline and returns the directory its volume
	// exposes, once the controller wrote it.
	victimDir := func(t *testing.T) string {
		t.Helper()
		inner := uniqueName("inner")
		victim := createPipeline(t, teamA, newPipeline(uniqueName("victim"), "", path.Join(nfsExport, "team-a", inner), step("model")))
		var dir string
		harmlessOnceObserved(t, func(ctx context.Context) (bool, error) {
			volumes, err := volumesControlledBy(ctx, victim.UID)
			if err != nil || len(volumes) == 0 {
				return false, err
			}
			dir = exposedDir(&volumes[0])
			return true, nil
		}, func(context.Context) error { return nil })
		return dir
	}
	attack := func(t *testing.T, dir string, attempt *pipelinev1beta1.Pipeline) {
		t.Helper()
		if attempt == nil {
			return
		}
		harmlessOnceObserved(t, func(ctx context.Context) (bool, error) { return pipelineObserved(ctx, attempt.Name) },
			func(ctx context.Context) error {
				volumes, err := volumesControlledBy(ctx, attempt.UID)
				if err != nil {
					return nil
				}
				for i := range volumes {
					if d := exposedDir(&volumes[i]); overlaps(d, dir) {
						return fmt.Errorf("team B's volume %s exposes %s, which overlaps team A's directory %s", volumes[i].Name, d, dir)
					}
				}
				return nil
			})
	}
	t.Run("share above A's directory", func(t *testing.T) {
		dir := victimDir(t)
		// B's share and name spell a directory at or above A's: the parent
		// of A's directory's parent, then its last element as the name.
		parent := path.Dir(dir)
		name := path.Base(parent)
		if strings.ContainsAny(name, "._") || len(name) > 63 {
			t.Fatalf("cannot spell %s as a Pipeline name", name)
		}
		attack(t, dir, attemptPipeline(t, teamB, newPipeline(name, "", path.Dir(parent), step("model"))))
	})
	t.Run("share inside A's directory", func(t *testing.T) {
		dir := victimDir(t)
		attack(t, dir, attemptPipeline(t, teamB, newPipeline(uniqueName("inside"), "", dir, step("model"))))
	})
}

// exposedDir is the NFS directory a volume of the controller exposes:
// share, then subDir when set.
func exposedDir(pv *corev1.PersistentVolume) string {
	if pv.Spec.CSI == nil {
		return ""
	}
	attrs := pv.Spec.CSI.VolumeAttributes
	return path.Join("/", attrs["share"], attrs["subDir"])
}

// overlaps reports whether one directory is the other or contains it.
func overlaps(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// Issue 35, "Images": a bare image ID passes a Docker Hub allowlist once
// normalised; what runs must be what was checked.
func TestBareImageID(t *testing.T) {
	requireSuite(t)
	nsB := teamNamespace(t, teamB)
	bare := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	p := newPipeline(uniqueName("bare"), nsB, nfsExport+"/team-b", step("model"))
	p.Spec.Steps[0].Image = bare
	attempt := attemptPipeline(t, teamB, p)
	if attempt == nil {
		return
	}
	harmlessOnceObserved(t, func(ctx context.Context) (bool, error) { return pipelineObserved(ctx, attempt.Name) },
		func(ctx context.Context) error {
			deployments, err := admin.kube.AppsV1().Deployments(nsB).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil
			}
			for _, d := range deployments.Items {
				for _, c := range d.Spec.Template.Spec.Containers {
					if controlledBy(&d, attempt.UID) && strings.HasPrefix(c.Image, "sha256:") {
						return fmt.Errorf("step Deployment %s runs image %q, a bare image ID on the node, not what the allowlist checked", d.Name, c.Image)
					}
				}
			}
			return nil
		})
}

// Issue 35, "No bounds": replicas and steps per Pipeline are limited, each
// refused with an error.
func TestPipelineBounds(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	t.Run("100000 replicas", func(t *testing.T) {
		nsB := teamNamespace(t, teamB)
		p := newPipeline(uniqueName("replicas"), nsB, nfsExport+"/team-b", step("model"))
		p.Spec.Steps[0].Replicas = ptr.To[int32](100000)
		_, err := teamB.crd.PipelineV1beta1().Pipelines().Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() { _ = admin.crd.PipelineV1beta1().Pipelines().Delete(ctx, p.Name, metav1.DeleteOptions{}) })
		}
		refused(t, "a step with 100000 replicas", err)
	})
	t.Run("65 steps", func(t *testing.T) {
		nsB := teamNamespace(t, teamB)
		var steps []pipelinev1beta1.PipelineStep
		for i := range 65 {
			steps = append(steps, step(fmt.Sprintf("model-%d", i)))
		}
		p := newPipeline(uniqueName("steps"), nsB, nfsExport+"/team-b", steps...)
		_, err := teamB.crd.PipelineV1beta1().Pipelines().Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() { _ = admin.crd.PipelineV1beta1().Pipelines().Delete(ctx, p.Name, metav1.DeleteOptions{}) })
		}
		refused(t, "a Pipeline of 65 steps", err)
	})
}

// Beside the admission policies, manifests/default's Pipeline webhook makes
// the one check they cannot (its overlap path): while a replica answers, a
// Pipeline whose directory lies inside another's is refused, in the
// webhook's words, and only for that.
func TestOverlapRefusedBesideThePolicies(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	share := path.Join(nfsExport, "team-a", uniqueName("overlap"))
	victim := createPipeline(t, teamA, newPipeline(uniqueName("victim"), "", share, step("model")))
	inside := newPipeline(uniqueName("inside"), "", path.Join(share, victim.Name), step("model"))
	const by = `admission webhook "validate.pipelines.distri-infer.ndsl.cn" denied the request`
	want := "overlaps Pipeline " + victim.Name + "'s directory"
	var last error
	// The webhook lists from the API server's watch cache, which has the
	// victim within moments.
	err := pollUntil(ctx, timeout, func(ctx context.Context) (bool, error) {
		_, err := teamA.crd.PipelineV1beta1().Pipelines().Create(ctx, inside, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if ctx.Err() != nil {
			return false, nil
		}
		last = err
		return last != nil && strings.Contains(last.Error(), want), nil
	})
	if err != nil {
		t.Fatalf("a Pipeline inside %s's directory: %v (nil: admitted); want it refused, %q", victim.Name, last, want)
	}
	if !strings.Contains(last.Error(), by) || strings.Contains(last.Error(), "may not create") {
		t.Errorf("refused with %q; want only the overlap, by %s", last, by)
	}
}
