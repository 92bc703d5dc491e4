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
	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/controllers/pipeline"
)

func bindPipelineFlags(o *pipeline.Options, fs *pflag.FlagSet) {
	fs.IntVar(&o.Workers, "concurrent-pipeline-syncs", o.Workers,
		"Pipelines reconciled at once by the pipeline controller.")
	fs.StringVar(&o.DefaultNamespace, "pipeline-namespace", o.DefaultNamespace,
		"Namespace for the children of Pipelines without spec.namespace; the install creates it (the controller only with --pipeline-create-namespaces).")
	fs.StringSliceVar(&o.AllowedNamespaces, "pipeline-allowed-namespaces", o.AllowedNamespaces,
		"Namespaces besides --pipeline-namespace that a Pipeline's spec.namespace may name; \"*\" allows any but kube-system, kube-public, "+
			"kube-node-lease and the manager's own namespace, which only an explicit entry allows. "+
			"A Pipeline naming another namespace is refused by the validating webhook and gets no children, Degraded=True with reason NamespaceNotAllowed and a Warning event.")
	fs.BoolVar(&o.CreateNamespaces, "pipeline-create-namespaces", o.CreateNamespaces,
		"Create a Pipeline's target namespace when it is missing (and again when it is deleted). Off, such a Pipeline gets no children "+
			"and Degraded=True with reason NamespaceNotFound until someone creates the namespace.")
	fs.Int32Var(&o.MaxReplicas, "pipeline-max-replicas", o.MaxReplicas,
		"Most replicas a Pipeline step may ask for; 0 is no limit. A step asking for more is refused by the validating webhook "+
			"and the Pipeline gets no children, Degraded=True with reason TooManyReplicas and a Warning event.")
	fs.StringSliceVar(&o.AllowedNFS, "pipeline-allowed-nfs", o.AllowedNFS,
		"NFS exports a Pipeline's modelStorage may name, each SERVER (any share) or SERVER:/share/prefix (that path and below); "+
			"comma-separated or repeated. Empty allows every export; set it in production. A Pipeline naming another export is refused "+
			"by the validating webhook and gets no children, Degraded=True with reason StorageNotAllowed and a Warning event.")
	fs.StringSliceVar(&o.AllowedImages, "pipeline-allowed-images", o.AllowedImages,
		"Registry (registry.example.com/) or repository (docker.io/library/nginx) prefixes every step image must start with, "+
			"once normalised as the kubelet resolves it (nginx:latest is docker.io/library/nginx:latest); comma-separated or repeated. "+
			"Empty allows every image. A Pipeline with another image is refused by the validating webhook and gets no children, "+
			"Degraded=True with reason ImageNotAllowed and a Warning event.")
}

// bindPipelinePodSecurityFlags binds the step pods' PodSecurity level.
func bindPipelinePodSecurityFlags(o *pipeline.Options, fs *pflag.FlagSet) {
	fs.StringVar((*string)(&o.PodSecurity), "pipeline-pod-security", string(o.PodSecurity),
		"PodSecurity level step pods are built to pass: \"baseline\" (seccomp RuntimeDefault, no privilege escalation, the image's own user, root included) "+
			"or \"restricted\" (also runAsNonRoot and every capability dropped: images must run as a non-root numeric USER). "+
			"A namespace labelled pod-security.kubernetes.io/enforce=restricted always gets restricted step pods. Step pods never mount a ServiceAccount token.")
}
