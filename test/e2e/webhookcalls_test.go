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
	"strconv"
	"strings"
)

// webhookCalls are the API server's own counts of its calls to the
// webhooks, from every client: the load's, but also the garbage collector's
// and the namespace controller's v1 reads, which no test sees fail.
type webhookCalls struct {
	admission, admissionFailed   float64
	conversion, conversionFailed float64
}

// apiServerWebhookCalls reads webhookCalls from the API server's /metrics.
// Failed calls are those the API server could not make (a failurePolicy
// Fail webhook's "failed calling webhook"), not a webhook's own rejections.
func apiServerWebhookCalls(ctx context.Context) (webhookCalls, error) {
	raw, err := cluster.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return webhookCalls{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	var c webhookCalls
	for line := range strings.Lines(string(raw)) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || strings.HasPrefix(series, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		name, labels, _ := strings.Cut(series, "{")
		switch name {
		case "apiserver_admission_webhook_request_total":
			c.admission += v
		case "apiserver_admission_webhook_rejection_count":
			if strings.Contains(labels, `error_type="calling_webhook_error"`) || strings.Contains(labels, `error_type="apiserver_internal_error"`) {
				c.admissionFailed += v
			}
		case "apiserver_crd_conversion_webhook_duration_seconds_count":
			c.conversion += v
			if strings.Contains(labels, `succeeded="false"`) {
				c.conversionFailed += v
			}
		}
	}
	return c, nil
}

func (c webhookCalls) minus(o webhookCalls) webhookCalls {
	return webhookCalls{
		admission: c.admission - o.admission, admissionFailed: c.admissionFailed - o.admissionFailed,
		conversion: c.conversion - o.conversion, conversionFailed: c.conversionFailed - o.conversionFailed,
	}
}

func (c webhookCalls) String() string {
	return fmt.Sprintf("admission calls %.0f, failed %.0f; conversion calls %.0f, failed %.0f",
		c.admission, c.admissionFailed, c.conversion, c.conversionFailed)
}
