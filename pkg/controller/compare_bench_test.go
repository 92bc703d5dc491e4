package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// BenchmarkUpToDateDeployment is the comparison every reconcile of an
// unchanged child makes: a Deployment as the server returns it (defaults
// filled in) against the apply configuration that made it. At steady state
// it is most of a reconcile's CPU.
func BenchmarkUpToDateDeployment(b *testing.B) {
	live, err := Typed[appsv1.Deployment](desiredDeployment())
	if err != nil {
		b.Fatal(err)
	}
	live.ResourceVersion = "42"
	live.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	live.Spec.Template.Spec.Containers[0].ImagePullPolicy = "Always"
	live.Spec.Template.Spec.RestartPolicy = "Always"
	live.Spec.Template.Spec.DNSPolicy = "ClusterFirst"
	live.Spec.Template.Spec.SchedulerName = "default-scheduler"
	live.Status.Replicas, live.Status.ReadyReplicas = 1, 1
	desired := desiredDeployment()
	b.ReportAllocs()
	for b.Loop() {
		ok, err := UpToDate(desired, live)
		if err != nil || !ok {
			b.Fatalf("UpToDate = %v, %v; want true", ok, err)
		}
	}
}
