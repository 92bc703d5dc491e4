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
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/crds"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

const usage = `
Usage:
  controller-manager [flags]
  controller-manager crds apply|release|delete ...   (see crds --help)
`

// Main parses args, runs the manager until SIGTERM or SIGINT and returns the
// exit code: 0 after a clean shutdown, 1 on bad flags, a startup failure or a
// lost lease.
func Main(args []string) int {
	if len(args) > 0 && args[0] == "crds" {
		if err := crds.Main(args[1:], loadRESTConfig); err != nil {
			return fail(err)
		}
		return 0
	}
	registry := NewRegistry()
	opts := options.NewOptions()
	fss := registry.Flags(opts)

	fs := pflag.NewFlagSet("controller-manager", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line below
	options.AddAll(fs, fss)
	fs.Usage = func() { printUsage(os.Stdout, registry, fss) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0 // fs.Usage has printed the help
		}
		return fail(err)
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected arguments %q; controller-manager takes only flags", fs.Args()))
	}
	if printVersionIfRequested(fs, os.Stdout) {
		return 0
	}

	if err := logsapi.ValidateAndApply(opts.Logs, nil); err != nil {
		return fail(err)
	}
	defer logs.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())

	m, err := NewManager(ctx, opts, registry)
	if err != nil {
		return fail(err)
	}
	if err := m.Run(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Controller manager stopped")
		return 1
	}
	return 0
}

// fail prints err on one line and returns exit code 1.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "controller-manager: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
	return 1
}

// printVersionIfRequested handles the --version flag that component-base's
// verflag registers. Its plain form prints this program's name: verflag's own
// printer would call it "Kubernetes". --version=raw is left to verflag.
func printVersionIfRequested(fs *pflag.FlagSet, w io.Writer) bool {
	if f := fs.Lookup("version"); f != nil && f.Value.String() == "true" {
		fmt.Fprintf(w, "controller-manager %s\n", version.Get())
		return true
	}
	verflag.PrintAndExitIfRequested()
	return false
}

func printUsage(w io.Writer, registry Registry, fss cliflag.NamedFlagSets) {
	fmt.Fprintln(w, "controller-manager runs these controllers against a Kubernetes cluster, under\nleader election (--controllers):")
	cols, _, _ := term.TerminalSize(w)
	for _, d := range registry {
		name := d.Name
		if d.DisabledByDefault {
			name += " (off by default)"
		}
		fmt.Fprintf(w, "\n  %s\n%s", name, indent(strings.ReplaceAll(d.Help, "`", ""), cols))
	}
	fmt.Fprint(w, usage)
	cliflag.PrintSections(w, fss, cols)
}

// indent wraps text to cols (80 when not a terminal) under a 6-space indent.
func indent(text string, cols int) string {
	if cols <= 0 {
		cols = 80
	}
	var b strings.Builder
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && 6+len(line)+1+len(word) >= cols {
			b.WriteString("      " + line + "\n")
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	b.WriteString("      " + line + "\n")
	return b.String()
}
