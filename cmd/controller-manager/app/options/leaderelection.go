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

package options

import (
	"fmt"
	"time"

	"k8s.io/client-go/tools/leaderelection"
)

// validateLeaseDurations checks the election's durations as client-go's
// NewLeaderElector will, so that a mistake stops the process at startup
// rather than after a warm standby started. It also refuses a lease
// duration that is not whole seconds: client-go writes it truncated
// (LeaseDurationSeconds), standbys take over after the truncated value, and
// the lease guard's safety rests on that being longer than the renew
// deadline.
func validateLeaseDurations(lease, renew, retry time.Duration) []error {
	var errs []error
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"--leader-elect-lease-duration", lease},
		{"--leader-elect-renew-deadline", renew},
		{"--leader-elect-retry-period", retry},
	} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.flag, d.value))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if lease%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be whole seconds: the Lease records it in seconds", lease))
	}
	if lease <= renew {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration (%s) must be greater than --leader-elect-renew-deadline (%s)", lease, renew))
	}
	if renew <= time.Duration(leaderelection.JitterFactor*float64(retry)) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be greater than %v × --leader-elect-retry-period (%s)", renew, leaderelection.JitterFactor, retry))
	}
	return errs
}
