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
	"testing"

	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/pkg/controller"
)

func TestControllerQueueFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    controller.QueueKind
		wantErr string
	}{
		{args: nil, want: controller.PriorityQueue},
		{args: []string{"--controller-queue=fifo"}, want: controller.FIFOQueue},
		{args: []string{"--controller-queue=priority"}, want: controller.PriorityQueue},
		{args: []string{"--controller-queue=lifo"}, wantErr: `--controller-queue must be one of priority, fifo, got "lifo"`},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		AddAll(fs, o.Flags(nil, nil))
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err := o.Validate()
		switch {
		case tc.wantErr != "":
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case o.Generic.ControllerQueue != tc.want:
			t.Errorf("%v: queue %q, want %q", tc.args, o.Generic.ControllerQueue, tc.want)
		}
	}
}
