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

package controller

import "github.com/spf13/pflag"

// Common are the options every controller has. The manager binds
// --concurrent-<controller>-syncs to Workers for a controller whose
// defaults give it workers, and sets Name and Queue for each build.
type Common struct {
	// Name is what the controller's queue and metrics go by: the shard
	// unit's when the manager splits the controller, else the controller's.
	Name string
	// Workers is the number of keys reconciled at once.
	Workers int
	// Queue is the order of the controller's queue (--controller-queue);
	// empty is the priority queue.
	Queue QueueKind
	// MaxRetries bounds a key's consecutive failed reconciles before it is
	// dropped until an event; 0 is DefaultMaxRetries. Not a flag: tests
	// lower it to reach the bound quickly.
	MaxRetries int
}

// CommonOptions returns c; an Options that embeds Common has it.
func (c *Common) CommonOptions() *Common { return c }

// Options are a controller's options, which its descriptor points the
// manager to: its own flags, bound in a flag set named after the
// controller and validated with the others, and the common ones (embed
// Common).
type Options interface {
	AddFlags(fs *pflag.FlagSet)
	Validate() error
	CommonOptions() *Common
}
