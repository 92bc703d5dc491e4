package controller

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

func mustDiff(t *testing.T, desired, live any) drift {
	t.Helper()
	want, err := fields(desired)
	if err != nil {
		t.Fatal(err)
	}
	have, err := fields(live)
	if err != nil {
		t.Fatal(err)
	}
	return diff(want, have)
}

func desiredDeployment() *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment("web", "shop").
		WithLabels(map[string]string{"app": "web"}).
		WithSpec(appsv1ac.DeploymentSpec().
			WithTemplate(corev1ac.PodTemplateSpec().
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").
					WithImage("nginx").
					WithPorts(corev1ac.ContainerPort().WithContainerPort(8080).WithProtocol(corev1.ProtocolTCP))))))
}

// A list another field manager holds entries of is replaced, addressed at
// the live object's index of the entry around it; an injected sidecar is
// not the controller's and stays.
func TestReplacePatchAddressesKeyedEntriesByLiveIndex(t *testing.T) {
	live, err := Typed[appsv1.Deployment](desiredDeployment())
	if err != nil {
		t.Fatal(err)
	}
	live.ResourceVersion = "42"
	live.Labels["team"] = "shop"
	app := live.Spec.Template.Spec.Containers[0]
	live.Spec.Template.Spec.Containers = []corev1.Container{{Name: "sidecar", Image: "envoy"}, app}
	if d := mustDiff(t, desiredDeployment(), live); d.any {
		t.Fatalf("others' labels and containers counted as drift: %+v", d)
	}

	live.Spec.Template.Spec.Containers[1].Ports = append(live.Spec.Template.Spec.Containers[1].Ports, corev1.ContainerPort{ContainerPort: 9})
	d := mustDiff(t, desiredDeployment(), live)
	if !d.any {
		t.Fatal("an extra port in the controller's container not detected")
	}
	patch, err := d.replacePatch(live.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"test","path":"/metadata/resourceVersion","value":"42"},` +
		`{"op":"replace","path":"/spec/template/spec/containers/1/ports","value":[{"containerPort":8080,"protocol":"TCP"}]}]`
	if string(patch) != want {
		t.Errorf("patch =\n%s\nwant\n%s", patch, want)
	}

	// A scalar apply sets is no list to replace.
	live.Spec.Template.Spec.Containers[1].Ports = app.Ports
	live.Spec.Template.Spec.Containers[1].Image = "evil"
	if d := mustDiff(t, desiredDeployment(), live); !d.any || len(d.lists) != 0 {
		t.Errorf("image edit: drift = %+v, want drift and no list", d)
	}
}

func TestReplacePatchOfServicePorts(t *testing.T) {
	desired := corev1ac.Service("web", "shop").WithSpec(corev1ac.ServiceSpec().
		WithSelector(map[string]string{"app": "web"}).
		WithPorts(corev1ac.ServicePort().WithPort(80).WithTargetPort(intstr.FromInt32(80)).WithProtocol(corev1.ProtocolTCP)))
	live, err := Typed[corev1.Service](desired)
	if err != nil {
		t.Fatal(err)
	}
	live.ResourceVersion = "7"
	live.Spec.ClusterIP = "10.96.0.12"
	live.TypeMeta = metav1.TypeMeta{} // as the informers' typed objects
	if d := mustDiff(t, desired, live); d.any {
		t.Fatalf("server defaults counted as drift: %+v", d)
	}
	live.Spec.Ports[0].Port = 8080 // re-keyed by hand
	patch, err := mustDiff(t, desired, live).replacePatch(live.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]any
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0]["op"] != "test" || ops[0]["value"] != "7" || ops[1]["op"] != "replace" || ops[1]["path"] != "/spec/ports" {
		t.Errorf("patch = %s", patch)
	}

	// The selector is an atomic map: a key added by hand is drift.
	live.Spec.Ports[0].Port = 80
	live.Spec.Selector["tier"] = "web"
	if d := mustDiff(t, desired, live); !d.any {
		t.Error("extended selector not detected")
	}
}
