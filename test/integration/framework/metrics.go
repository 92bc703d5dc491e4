package framework

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// ReconcileCount sums controller_manager_reconcile_total for one controller
// across results, as seen by every manager in this process.
func ReconcileCount(t testing.TB, controller string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_manager_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
