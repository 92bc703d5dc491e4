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

package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// The manager's own v1beta1 requests each carry the deprecation warning: it
// is logged once, not once per request.
func TestOnceWarningsLogsEachWarningOnce(t *testing.T) {
	var out bytes.Buffer
	cfg := textlogger.NewConfig(textlogger.Output(&out))
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(cfg))
	w := &onceWarnings{}
	for range 3 {
		w.HandleWarningHeaderWithContext(ctx, 299, "", "v1beta1 App is deprecated")
	}
	w.HandleWarningHeaderWithContext(ctx, 299, "", "another")
	w.HandleWarningHeaderWithContext(ctx, 199, "", "not a warning code")
	if got := strings.Count(out.String(), "v1beta1 App is deprecated"); got != 1 {
		t.Errorf("the repeated warning was logged %d times, want 1:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "another") || strings.Contains(out.String(), "not a warning code") {
		t.Errorf("want each distinct 299 warning once and nothing else:\n%s", out.String())
	}
}
