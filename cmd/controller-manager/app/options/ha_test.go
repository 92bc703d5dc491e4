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
	"strings"
	"testing"
)

func TestHAOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    HAOptions
		wantErr string
	}{
		{"defaults", DefaultHAOptions(), ""},
		{"cold", HAOptions{Standby: StandbyCold, Shards: 1}, ""},
		{"per controller, warm", HAOptions{Standby: StandbyWarm, PerController: true, Shards: 1}, ""},
		{"unknown standby", HAOptions{Standby: "hot"}, `--standby must be "warm" or "cold", got "hot"`},
		{"per controller, cold", HAOptions{Standby: StandbyCold, PerController: true}, "--leader-elect-per-controller needs --standby=warm"},
	} {
		err := tc.opts.Validate()
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestShardsValidation(t *testing.T) {
	for _, tc := range []struct {
		ha      HAOptions
		wantErr string
	}{
		{HAOptions{Standby: StandbyWarm, Shards: 1}, ""},
		{HAOptions{Standby: StandbyWarm, PerController: true, Shards: 4}, ""},
		{HAOptions{Standby: StandbyWarm, Shards: 2}, "--shards=2 needs --leader-elect-per-controller"},
		{HAOptions{Standby: StandbyWarm, PerController: true, Shards: 0}, "--shards must be between 1 and 64, got 0"},
		{HAOptions{Standby: StandbyWarm, PerController: true, Shards: 65}, "--shards must be between 1 and 64, got 65"},
	} {
		err := tc.ha.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: Validate() = %v, want %q", tc.ha, err, tc.wantErr)
		}
	}
}
