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
