package chart

import "testing"

// helm lint --strict passes with the defaults and with every optional part.
func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":                     nil,
		"everything":                   everything("self"),
		"everything with cert-manager": everything("cert-manager"),
		"no webhooks":                  {"webhooks": map[string]any{"enabled": false}, "crds": map[string]any{"keep": false}},
	} {
		if out, err := helm(t, "lint", "--strict", chartDir(t), "--namespace", "platform", "-f", valuesFile(t, values)); err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}
