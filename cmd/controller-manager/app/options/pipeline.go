package options

import (
	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/controllers/pipeline"
)

func bindPipelineFlags(o *pipeline.Options, fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "concurrent-pipeline-syncs", o.Workers,
		"Pipelines reconciled at once by the pipeline controller.")
	fs.StringVar(&o.DefaultNamespace, "pipeline-namespace", o.DefaultNamespace,
		"Namespace for the children of Pipelines without spec.namespace; the controller creates it when it is missing.")
	fs.StringSliceVar(&o.AllowedNamespaces, "pipeline-allowed-namespaces", o.AllowedNamespaces,
		"Namespaces besides --pipeline-namespace that a Pipeline's spec.namespace may name; \"*\" allows any. "+
			"A Pipeline naming another namespace gets no children, Degraded=True with reason NamespaceNotAllowed and a Warning event.")
}
