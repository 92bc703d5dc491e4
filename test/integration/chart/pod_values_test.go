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

package chart

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// managerBindings are the bindings whose subjects name the ServiceAccount
// sa in the release's namespace.
func managerBindings(t *testing.T, objects []object, sa string) []string {
	t.Helper()
	var out []string
	for _, o := range objects {
		for _, s := range subjects(t, o) {
			if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == "ndsl-system" {
				out = append(out, o.key())
			}
		}
	}
	slices.Sort(out)
	return out
}

// withValues is base with more top-level values.
func withValues(base map[string]any, more map[string]any) map[string]any {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

// Issue 37: serviceAccount.create, .name and .annotations; the Deployment
// and every binding of the manager's name the chosen ServiceAccount.
func TestChartServiceAccount(t *testing.T) {
	for _, certificates := range []string{"self", "cert-manager"} {
		t.Run(certificates, func(t *testing.T) {
			defaults := managerBindings(t, render(t, "ndsl-system", everything(certificates)), "controller-manager")
			if len(defaults) < 5 {
				t.Fatalf("only %d bindings of the manager's ServiceAccount by default: %v", len(defaults), defaults)
			}
			for _, create := range []bool{true, false} {
				objects := render(t, "ndsl-system", withValues(everything(certificates), map[string]any{"serviceAccount": map[string]any{
					"create": create, "name": "platform-cm", "annotations": map[string]any{"iam.gke.io/gcp-service-account": "cm@p.iam.gserviceaccount.com"}}}))
				if got := deploymentOf(t, objects).Spec.Template.Spec.ServiceAccountName; got != "platform-cm" {
					t.Errorf("create=%v: serviceAccountName %q, want platform-cm", create, got)
				}
				if old := managerBindings(t, objects, "controller-manager"); len(old) != 0 {
					t.Errorf("create=%v: bindings still name controller-manager: %v", create, old)
				}
				bound := managerBindings(t, objects, "platform-cm")
				// The same bindings, under the same names.
				if !slices.Equal(bound, defaults) {
					t.Errorf("create=%v: bindings of platform-cm %v, want %v", create, bound, defaults)
				}
				var sas []string
				for _, o := range ofKind(objects, "ServiceAccount") {
					sas = append(sas, o.name())
				}
				if create {
					sa := one(t, objects, "ServiceAccount", "platform-cm")
					if sa.annotations()["iam.gke.io/gcp-service-account"] != "cm@p.iam.gserviceaccount.com" {
						t.Errorf("ServiceAccount annotations %v", sa.annotations())
					}
				} else if slices.Contains(sas, "platform-cm") || slices.Contains(sas, "controller-manager") {
					t.Errorf("create=false: the chart renders the manager's ServiceAccount: %v", sas)
				}
			}
		})
	}
}

// podOf is the Deployment's pod template spec.
func podOf(t *testing.T, values map[string]any) corev1.PodSpec {
	t.Helper()
	return deploymentOf(t, render(t, "ndsl-system", values)).Spec.Template.Spec
}

// Issue 37: the default pod fixes no UID (OpenShift's restricted SCC refuses
// a fixed one) and still passes PodSecurity restricted, which the real API
// server's admission checks; runAsNonRoot holds because the image's USER is
// numeric and not root. Both security contexts take overrides.
func TestChartSecurityContexts(t *testing.T) {
	pod := podOf(t, nil)
	psc, sc := pod.SecurityContext, pod.Containers[0].SecurityContext
	if psc == nil || sc == nil || !ptr.Deref(psc.RunAsNonRoot, false) {
		t.Fatalf("default security contexts %+v, %+v: want runAsNonRoot", psc, sc)
	}
	if psc.RunAsUser != nil || psc.RunAsGroup != nil || sc.RunAsUser != nil || sc.RunAsGroup != nil {
		t.Errorf("default security contexts fix a UID or GID: %+v, %+v", psc, sc)
	}
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(string(dockerfile), -1)
	if len(users) == 0 || !regexp.MustCompile(`^[1-9][0-9]*(:[0-9]+)?$`).MatchString(users[len(users)-1][1]) {
		t.Errorf("the image's USER %v is not a numeric non-root UID, which runAsNonRoot without runAsUser needs", users)
	}

	ctx := context.Background()
	ns, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "restricted-", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: pod.ServiceAccountName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "controller-manager-"}, Spec: pod},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the default pod does not pass PodSecurity restricted: %v", err)
	}

	// Overrides merge into the defaults; null drops a default.
	pod = podOf(t, map[string]any{
		"podSecurityContext": map[string]any{"runAsUser": 1000, "fsGroup": 2000, "seccompProfile": nil},
		"securityContext":    map[string]any{"readOnlyRootFilesystem": false},
	})
	psc, sc = pod.SecurityContext, pod.Containers[0].SecurityContext
	if ptr.Deref(psc.RunAsUser, 0) != 1000 || ptr.Deref(psc.FSGroup, 0) != 2000 || !ptr.Deref(psc.RunAsNonRoot, false) || psc.SeccompProfile != nil {
		t.Errorf("podSecurityContext %+v: want runAsUser 1000, fsGroup 2000, runAsNonRoot and no seccompProfile", psc)
	}
	if ptr.Deref(sc.ReadOnlyRootFilesystem, true) || ptr.Deref(sc.AllowPrivilegeEscalation, true) || sc.Capabilities == nil {
		t.Errorf("securityContext %+v: want a writable root filesystem and the other defaults", sc)
	}
}

// podExtras sets every pod-level value of issue 37, part 5.4.
var podExtras = map[string]any{
	"priorityClassName": "platform-critical",
	"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "ndsl-controller-manager"}}}},
	"podLabels":         map[string]any{"team": "platform"},
	"podAnnotations":    map[string]any{"example.com/scrape": "false"},
	"extraEnv":          []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}},
	"extraVolumes":      []any{map[string]any{"name": "corp-ca", "configMap": map[string]any{"name": "corp-ca"}}},
	"extraVolumeMounts": []any{map[string]any{"name": "corp-ca", "mountPath": "/etc/ssl/certs/corp-ca.crt", "subPath": "ca.crt", "readOnly": true}},
}

// Issue 37: priorityClassName, topologySpreadConstraints, podLabels,
// podAnnotations, extraEnv, extraVolumes and extraVolumeMounts reach the
// pod, beside (not instead of) the chart's own labels, volumes and mounts.
func TestChartPodExtras(t *testing.T) {
	for _, certificates := range []string{"self", "cert-manager"} {
		t.Run(certificates, func(t *testing.T) {
			objects := render(t, "ndsl-system", withValues(podExtras, map[string]any{"webhooks": map[string]any{"certificates": certificates}}))
			d := deploymentOf(t, objects)
			pod, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
			if pod.PriorityClassName != "platform-critical" {
				t.Errorf("priorityClassName %q", pod.PriorityClassName)
			}
			if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" {
				t.Errorf("topologySpreadConstraints %+v", pod.TopologySpreadConstraints)
			}
			if d.Spec.Template.Labels["team"] != "platform" || d.Spec.Template.Annotations["example.com/scrape"] != "false" {
				t.Errorf("pod labels %v, annotations %v", d.Spec.Template.Labels, d.Spec.Template.Annotations)
			}
			if _, ok := d.Spec.Selector.MatchLabels["team"]; ok || d.Labels["team"] != "" {
				t.Errorf("podLabels reach the selector %v or the Deployment %v", d.Spec.Selector.MatchLabels, d.Labels)
			}
			if len(c.Env) != 1 || c.Env[0].Name != "HTTPS_PROXY" || c.Env[0].Value != "http://proxy.example.com:3128" {
				t.Errorf("env %+v", c.Env)
			}
			var volumes, mounts []string
			for _, v := range pod.Volumes {
				volumes = append(volumes, v.Name)
			}
			for _, m := range c.VolumeMounts {
				mounts = append(mounts, m.Name+":"+m.MountPath)
			}
			want, wantMounts := []string{"corp-ca"}, []string{"corp-ca:/etc/ssl/certs/corp-ca.crt"}
			if certificates == "cert-manager" {
				want, wantMounts = append([]string{"webhook-certs"}, want...), append([]string{"webhook-certs:/var/run/webhook-certs"}, wantMounts...)
			}
			if !slices.Equal(volumes, want) || !slices.Equal(mounts, wantMounts) {
				t.Errorf("volumes %v, mounts %v; want %v, %v", volumes, mounts, want, wantMounts)
			}
		})
	}
	// Unset, none of them is rendered (the kustomize build has none).
	pod := podOf(t, nil)
	if pod.PriorityClassName != "" || pod.TopologySpreadConstraints != nil || pod.Containers[0].Env != nil || pod.Volumes != nil || pod.Containers[0].VolumeMounts != nil {
		t.Errorf("default pod has extras: %+v", pod)
	}
}
