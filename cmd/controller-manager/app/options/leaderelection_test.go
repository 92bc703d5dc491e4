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
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// TestLeaderElectionFlagsAsClientGo: the durations are refused at startup
// exactly when client-go's NewLeaderElector would refuse them later (after
// a warm standby started), and a lease duration that client-go would
// truncate (LeaseDurationSeconds is whole seconds) is refused too.
func TestLeaderElectionFlagsAsClientGo(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		{args: []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=2500ms", "--leader-elect-retry-period=2s"}},
		{args: []string{"--leader-elect-renew-deadline=2400ms", "--leader-elect-retry-period=2s"}, wantErr: "must be greater than 1.2 × --leader-elect-retry-period"},
		{args: []string{"--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=2s"}, wantErr: "must be greater than 1.2 × --leader-elect-retry-period"},
		{args: []string{"--leader-elect-retry-period=0s"}, wantErr: "--leader-elect-retry-period must be positive"},
		{args: []string{"--leader-elect-renew-deadline=0s", "--leader-elect-retry-period=-1s"}, wantErr: "--leader-elect-renew-deadline must be positive"},
		{args: []string{"--leader-elect-lease-duration=10s"}, wantErr: "must be greater than --leader-elect-renew-deadline"},
		{args: []string{"--leader-elect-lease-duration=10500ms"}, wantErr: "--leader-elect-lease-duration (10.5s) must be whole seconds"},
		{args: []string{"--leader-elect-lease-duration=0s"}, wantErr: "--leader-elect-lease-duration must be positive"},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		AddAll(fs, o.Flags(nil, nil))
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err := o.Validate()
		if tc.wantErr == "" && err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantErr)
		}
		// Whatever passes here passes client-go.
		le := o.LeaderElection
		_, clientGoErr := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          &resourcelock.LeaseLock{LockConfig: resourcelock.ResourceLockConfig{Identity: "me"}},
			LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		})
		if err == nil && clientGoErr != nil {
			t.Errorf("%v: accepted at startup, but client-go refuses it: %v", tc.args, clientGoErr)
		}
	}
}
