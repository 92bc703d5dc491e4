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
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// The Helm release make e2e-kind installs, and what the upgrade test is
// given (hack/kind/e2e.sh sets them; see docs/testing.md).
const (
	helmRelease = "ndsl"
	// envUpgradeFromChart is the earlier commit's chart directory; the test
	// runs only when it is set.
	envUpgradeFromChart = "E2E_UPGRADE_FROM_CHART"
	// envUpgradeFromImage is the earlier commit's image, loaded into the nodes.
	envUpgradeFromImage = "E2E_UPGRADE_FROM_IMAGE"
	// envImage is the current image, loaded into the nodes.
	envImage = "E2E_IMAGE"
	// envHelm is the helm binary; envHelmValues the user's values file,
	// given unchanged to every chart version.
	envHelm       = "E2E_HELM"
	envHelmValues = "E2E_HELM_VALUES"
)

// upgradeApps is how many Apps (2 pods, a Service and an Ingress each) live
// through the upgrade.
const upgradeApps = 3

// helmUpgrade is the setup of TestInClusterHelmUpgradeAndRollback.
type helmUpgrade struct {
	helm, values          string
	oldChart, oldImage    string
	newChart, newImage    string
	kubeconfig, namespace string
}

func helmUpgradeFromEnv(t *testing.T) helmUpgrade {
	t.Helper()
	requireInClusterOnRealNodes(t)
	if os.Getenv(envUpgradeFromChart) == "" {
		t.Skipf("%s is not set: make e2e-kind runs this test alone, from the chart and image of hack/kind/upgrade-from", envUpgradeFromChart)
	}
	u := helmUpgrade{
		helm: os.Getenv(envHelm), values: os.Getenv(envHelmValues),
		oldChart: os.Getenv(envUpgradeFromChart), oldImage: os.Getenv(envUpgradeFromImage),
		newChart: cluster.RepoRoot() + "/charts/controller-manager", newImage: os.Getenv(envImage),
		kubeconfig: cluster.KubeconfigPath, namespace: framework.ManagerNamespace,
	}
	for env, v := range map[string]string{envHelm: u.helm, envHelmValues: u.values, envUpgradeFromImage: u.oldImage, envImage: u.newImage} {
		if v == "" {
			t.Fatalf("%s is not set; the upgrade test needs %s, %s, %s, %s and %s", env,
				envUpgradeFromChart, envUpgradeFromImage, envImage, envHelm, envHelmValues)
		}
	}
	return u
}

// run runs helm on the release's namespace.
func (u helmUpgrade) run(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--kubeconfig", u.kubeconfig, "--namespace", u.namespace)
	out, err := exec.CommandContext(ctx, u.helm, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// install upgrades (or installs) the release to chart with image and the
// user's values, as a user does: the same values file, not --reuse-values;
// more are further helm arguments.
func (u helmUpgrade) install(t *testing.T, chart, image string, more ...string) {
	t.Helper()
	repo, tag, _ := strings.Cut(image, ":")
	args := append([]string{"upgrade", "--install", helmRelease, chart, "-f", u.values,
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag}, more...)
	if _, err := u.run(context.Background(), args...); err != nil {
		t.Fatal(err)
	}
}

// shardsValues writes a values file that adds --leader-elect-per-controller
// and --shards=2 to the user's extraArgs, read from values, and returns its
// path.
func shardsValues(t *testing.T, values string) string {
	t.Helper()
	data, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ExtraArgs []string `json:"extraArgs"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("reading %s: %v", values, err)
	}
	out, err := yaml.Marshal(map[string][]string{"extraArgs": append(v.ExtraArgs, "--leader-elect-per-controller", "--shards=2")})
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/shards.yaml"
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// revision is the release's deployed revision.
func (u helmUpgrade) revision(t *testing.T) int {
	t.Helper()
	out, err := u.run(context.Background(), "history", helmRelease, "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var history []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &history); err != nil {
		t.Fatalf("helm history: %v: %s", err, out)
	}
	for _, h := range slices.Backward(history) {
		if h.Status == "deployed" {
			return h.Revision
		}
	}
	t.Fatalf("helm history: no deployed revision of %s: %s", helmRelease, out)
	return 0
}

// TestInClusterHelmUpgradeAndRollback upgrades the manager with helm from an
// earlier commit's chart and image to the current ones and rolls back to the
// earlier revision, each step while a user creates Apps and lists them
// through v1beta1. After each step the manager's Deployment is Available on
// the step's image, no request failed, and the Apps made before it are
// untouched: every one Ready with no transition in between and the same
// observed generation, their Deployments at the same generation (one more
// after the upgrade that moves the owner references to v1, from a version
// that stored v1beta1: a metadata write), the same ReplicaSets, the same
// pods (UIDs) with the same restart counts, their Services and Ingresses
// the same objects. After that upgrade the Apps and the Pipelines are
// stored at v1 alone (status.storedVersions).
func TestInClusterHelmUpgradeAndRollback(t *testing.T) {
	u := helmUpgradeFromEnv(t)
	if managerImage(t) != u.oldImage {
		// make e2e-kind's suite ran on the current version: the earlier one
		// goes over it, as the starting point.
		u.install(t, u.oldChart, u.oldImage)
		waitManagerRolledOut(t, u.oldImage)
	}
	oldRevision := u.revision(t)

	ns := newNamespace(t)
	for i := range upgradeApps {
		app := newApp(fmt.Sprintf("survivor-%d", i), 2, true)
		app.Spec.EnableIngress = true
		app.Annotations[appv1beta1.EnableIngressRequestedAnnotation] = "true"
		createApp(t, ns, app)
	}
	waitAppsReady(t, ns, upgradeApps, 3*time.Minute)
	before := observeApps(t, ns)

	// The upgrade migrates when the earlier version left objects stored at
	// another version than v1.
	migrates := !storedAt(t, "apps.ingress.example.com", "v1") || !storedAt(t, pipelinesCRD, "v1")
	shards := shardsValues(t, u.values)
	for _, step := range []struct {
		name  string
		image string
		do    func()
		// lease is the Lease one of the new pods must hold after the step.
		lease string
		// migrates: the step moves the Apps and Pipelines stored at
		// v1beta1 to v1, and their children's owner references with them.
		migrates bool
	}{
		{"helm upgrade to the current chart and image", u.newImage, func() { u.install(t, u.newChart, u.newImage) }, framework.LeaseName, migrates},
		// The Lease layout changes: replicas of two layouts run side by
		// side during the rolling update, and only one layout may lead.
		{"helm upgrade that turns --shards=2 on", u.newImage, func() { u.install(t, u.newChart, u.newImage, "-f", shards) },
			framework.LeaseName + "-app-0-of-2", false},
		// Back to the earlier version and its values: one Lease.
		{fmt.Sprintf("helm rollback to revision %d", oldRevision), u.oldImage, func() {
			if _, err := u.run(context.Background(), "rollback", helmRelease, fmt.Sprint(oldRevision)); err != nil {
				t.Fatal(err)
			}
		}, framework.LeaseName, false},
	} {
		// A namespace of its own: the load names its Apps from 1 again.
		loadNS := newNamespace(t)
		load := startRequestLoad(t, loadNS)
		load.waitStarted(t)
		layouts := watchLayouts(t)
		began := time.Now()
		step.do()
		pods := waitManagerRolledOut(t, step.image)
		t.Logf("%s: manager pods %v on %s Available %v after it began", step.name, podNames(pods), step.image,
			time.Since(began).Round(100*time.Millisecond))
		load.check(t, step.name)
		waitLoadSettled(t, loadNS)
		waitLeaseHeldAmong(t, step.lease, pods)
		if step.migrates {
			waitStoredVersions(t, "apps.ingress.example.com", "v1")
			waitStoredVersions(t, pipelinesCRD, "v1")
		}
		checkLayouts(t, layouts, step.name)
		waitAppsReady(t, ns, upgradeApps, time.Minute)
		after := observeApps(t, ns)
		for _, d := range before.diff(after, step.migrates) {
			t.Errorf("%s changed an App's children: %s", step.name, d)
		}
		for _, w := range before.writes(after) {
			t.Logf("%s: %s", step.name, w)
		}
		before = after
	}
}

// storedAt says whether the CRD's status.storedVersions is exactly version.
func storedAt(t *testing.T, crd, version string) bool {
	t.Helper()
	client := apiextensionsclient.NewForConfigOrDie(cluster.Config)
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crd, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: storedVersions %v before the upgrade", crd, got.Status.StoredVersions)
	return slices.Equal(got.Status.StoredVersions, []string{version})
}

// waitStoredVersions waits until the CRD's status.storedVersions is
// exactly version: the leader has rewritten every object stored at another.
func waitStoredVersions(t *testing.T, crd, version string) {
	t.Helper()
	client := apiextensionsclient.NewForConfigOrDie(cluster.Config)
	began := time.Now()
	eventually(t, 2*time.Minute, crd+" stored at "+version+" alone", func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.Equal(got.Status.StoredVersions, []string{version}), fmt.Errorf("storedVersions %v", got.Status.StoredVersions)
	})
	t.Logf("%s: storedVersions [%s] %v after the upgrade's rollout", crd, version, time.Since(began).Round(100*time.Millisecond))
}

// waitLoadSettled waits until kube-controller-manager has caught up with
// the load's Apps: each of their Deployments observed by the Deployment
// controller, and none left of a deleted App for the garbage collector. The
// load makes five of its writes a request (ReplicaSet, status, two deletes)
// at 10 a second, beyond its default 20 QPS: a backlog left from one step
// would delay the next step's rollout by minutes.
func waitLoadSettled(t *testing.T, ns string) {
	t.Helper()
	began := time.Now()
	eventually(t, disruptionTimeout, "kube-controller-manager to catch up with the load in "+ns, func(ctx context.Context) (bool, error) {
		apps, err := cluster.Typed.AppV1beta1().Apps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		deployments, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var unobserved int
		for _, d := range deployments.Items {
			if d.Status.ObservedGeneration < d.Generation {
				unobserved++
			}
		}
		if len(deployments.Items) != len(apps.Items) || unobserved > 0 {
			return false, fmt.Errorf("%d Apps, %d Deployments, %d not observed", len(apps.Items), len(deployments.Items), unobserved)
		}
		return true, nil
	})
	t.Logf("kube-controller-manager caught up with the load in %v", time.Since(began).Round(100*time.Millisecond))
}

// managerImage is the image of the manager's Deployment's first container.
func managerImage(t *testing.T) string {
	t.Helper()
	d, err := cluster.Kube.AppsV1().Deployments(framework.ManagerNamespace).Get(context.Background(),
		framework.ManagerDeploymentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// waitManagerRolledOut waits until the manager's Deployment has rolled out
// image and only its two pods are left, Running and Ready. It returns them.
func waitManagerRolledOut(t *testing.T, image string) []corev1.Pod {
	t.Helper()
	waitDeploymentRolledOut(t, framework.ManagerNamespace, framework.ManagerDeploymentName, image)
	return waitManagerReady(t, time.Minute)
}

// waitDeploymentRolledOut waits until the Deployment ns/name has rolled out
// image: observed, every replica updated and available, and no pod of
// another image or being deleted left.
func waitDeploymentRolledOut(t *testing.T, ns, name, image string) {
	t.Helper()
	eventually(t, disruptionTimeout, "Deployment "+ns+"/"+name+" to roll out "+image, func(ctx context.Context) (bool, error) {
		d, err := cluster.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		s := d.Status
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return false, fmt.Errorf("image %s", got)
		}
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			return false, fmt.Errorf("generation %d observed %d, %d replicas: %d updated, %d available, %d in all",
				d.Generation, s.ObservedGeneration, want, s.UpdatedReplicas, s.AvailableReplicas, s.Replicas)
		}
		list, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: managerSelector})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
				return false, fmt.Errorf("pod %s of image %s still there (deleted: %v)", p.Name, p.Spec.Containers[0].Image, p.DeletionTimestamp != nil)
			}
		}
		return true, nil
	})
}

// appsWorld is what a manager upgrade must leave alone: the Apps' children
// and pods, by name.
type appsWorld struct {
	// apps: the Ready condition and since when, and the observed generation.
	apps map[string]string
	// deployments: UID and ReplicaSets.
	deployments map[string]string
	// generations: each Deployment's generation.
	generations map[string]int64
	// pods: UID and restart count of each live pod of an App.
	pods map[string]string
	// children: the UID of each Service and Ingress.
	children map[string]types.UID
	// versions: every child's resourceVersion, to tell writes that roll nothing out.
	versions map[string]string
}

// observeApps reads the children of the Apps in ns.
func observeApps(t *testing.T, ns string) appsWorld {
	t.Helper()
	ctx := context.Background()
	list, err := cluster.Typed.AppV1beta1().Apps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := appsWorld{apps: map[string]string{}, deployments: map[string]string{}, generations: map[string]int64{}, pods: map[string]string{},
		children: map[string]types.UID{}, versions: map[string]string{}}
	for _, app := range list.Items {
		// A Ready that flipped in between shows in its transition time.
		ready := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionReady)
		if ready == nil {
			ready = &metav1.Condition{}
		}
		w.apps[app.Name] = fmt.Sprintf("Ready=%s since %s, generation %d observed %d", ready.Status,
			ready.LastTransitionTime.UTC().Format(time.RFC3339), app.Generation, app.Status.ObservedGeneration)
	}
	managed := metav1.ListOptions{LabelSelector: appcontroller.AppLabel}
	deployments, err := cluster.Kube.AppsV1().Deployments(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		rs := replicaSetsOf(t, ns, &d)
		slices.Sort(rs)
		w.deployments[d.Name] = fmt.Sprintf("uid %s, ReplicaSets %v", d.UID, rs)
		w.generations[d.Name] = d.Generation
		w.versions["Deployment "+d.Name] = d.ResourceVersion
	}
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		var restarts int32
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		w.pods[p.Name] = fmt.Sprintf("uid %s, %d restarts", p.UID, restarts)
	}
	services, err := cluster.Kube.CoreV1().Services(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range services.Items {
		w.children["Service "+s.Name] = s.UID
		w.versions["Service "+s.Name] = s.ResourceVersion
	}
	ingresses, err := cluster.Kube.NetworkingV1().Ingresses(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ingresses.Items {
		w.children["Ingress "+i.Name] = i.UID
		w.versions["Ingress "+i.Name] = i.ResourceVersion
	}
	if len(w.deployments) != upgradeApps || len(w.pods) != 2*upgradeApps || len(w.children) != 2*upgradeApps {
		t.Fatalf("the Apps in %s have %d Deployments, %d live pods, %d Services and Ingresses; want %d, %d, %d",
			ns, len(w.deployments), len(w.pods), len(w.children), upgradeApps, 2*upgradeApps, 2*upgradeApps)
	}
	return w
}

// diff lists what differs between w and after, in words.
//
// metadataWrite allows each Deployment one metadata write, which moves its
// generation (a Deployment's annotations count) but rolls nothing out: the
// upgrade that moves the children's owner references to the stored
// version, v1, and with it drops the created-from annotation of children an
// earlier manager only created.
func (w appsWorld) diff(after appsWorld, metadataWrite bool) []string {
	d := diffMaps("App", w.apps, after.apps)
	d = append(d, diffMaps("Deployment", w.deployments, after.deployments)...)
	for name, g := range w.generations {
		if a := after.generations[name]; a != g && (!metadataWrite || a != g+1) {
			d = append(d, fmt.Sprintf("Deployment %s: generation %d, was %d", name, a, g))
		}
	}
	d = append(d, diffMaps("pod", w.pods, after.pods)...)
	d = append(d, diffMaps("child", w.children, after.children)...)
	return d
}

// writes lists the children written between w and after.
func (w appsWorld) writes(after appsWorld) []string {
	var written []string
	for _, k := range slices.Sorted(maps.Keys(w.versions)) {
		if v, ok := after.versions[k]; ok && v != w.versions[k] {
			written = append(written, k+" written")
		}
	}
	return written
}

func diffMaps[V comparable](kind string, before, after map[string]V) []string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		a, ok := after[k]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("%s %s (%v) is gone", kind, k, before[k]))
		case a != before[k]:
			d = append(d, fmt.Sprintf("%s %s: %v, was %v", kind, k, a, before[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			d = append(d, fmt.Sprintf("%s %s (%v) is new", kind, k, after[k]))
		}
	}
	return d
}
