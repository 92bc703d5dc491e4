{{/*
Labels of every object: the manifests' app.kubernetes.io/name, Helm's
standard labels and commonLabels. The names are fixed (as in manifests/):
the e2e suite, the runbooks and the manager's defaults use them.
*/}}
{{- define "cm.labels" -}}
app.kubernetes.io/name: ndsl-controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The manager's pods; the Deployment's selector, fixed across upgrades. */}}
{{- define "cm.selectorLabels" -}}
app.kubernetes.io/name: ndsl-controller-manager
app.kubernetes.io/component: controller-manager
{{- end }}

{{/* The manager's ServiceAccount: the chart's, or one of the user's (serviceAccount.create false). */}}
{{- define "cm.serviceAccountName" -}}
{{ .Values.serviceAccount.name | default "controller-manager" }}
{{- end }}

{{/* The manager's ServiceAccount as a binding subject. */}}
{{- define "cm.subject" -}}
- kind: ServiceAccount
  name: {{ include "cm.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{- define "cm.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Whether the manager issues the webhook certificate and keeps the caBundles. */}}
{{- define "cm.selfManagedCerts" -}}
{{- if and .Values.webhooks.enabled (eq .Values.webhooks.certificates "self") }}true{{ end }}
{{- end }}

{{- define "cm.certManager" -}}
{{- if and .Values.webhooks.enabled (eq .Values.webhooks.certificates "cert-manager") }}true{{ end }}
{{- end }}

{{/* cainjector's annotation: the Certificate whose CA goes into the caBundles. */}}
{{- define "cm.injectCA" -}}
{{- if include "cm.certManager" . }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/controller-manager-webhook
{{- end }}
{{- end }}

{{/* The manager's flags. The first five are manifests/manager/deployment.yaml's. */}}
{{- define "cm.args" -}}
- --leader-elect={{ .Values.leaderElection.enabled }}
- {{ printf "--http-address=:%d" (int .Values.metrics.port) | quote }}
- --secure-serving=true
- --shutdown-timeout=30s
- --shutdown-delay-duration=5s
{{- with .Values.leaderElection.leaseDuration }}
- {{ printf "--leader-elect-lease-duration=%s" . | quote }}
{{- end }}
{{- with .Values.leaderElection.renewDeadline }}
- {{ printf "--leader-elect-renew-deadline=%s" . | quote }}
{{- end }}
{{- with .Values.leaderElection.retryPeriod }}
- {{ printf "--leader-elect-retry-period=%s" . | quote }}
{{- end }}
{{- $controllers := .Values.controllers }}
{{- range splitList " " (include "cm.offByDefault" .) }}
{{- if and . (not (has . $controllers)) (index $.Values . | default dict).enabled }}
{{- $controllers = append $controllers . }}
{{- end }}
{{- end }}
{{- if ne (join "," $controllers) "*" }}
- {{ printf "--controllers=%s" (join "," $controllers) | quote }}
{{- end }}
{{- if not .Values.webhooks.enabled }}
- --webhooks=false
{{- else }}
- {{ printf "--webhook-port=%d" (int .Values.webhooks.port) | quote }}
{{- end }}
{{- if and .Values.webhooks.enabled (include "cm.certManager" .) }}
- --webhook-cert-dir=/var/run/webhook-certs
# cert-manager's certificate names the metrics Service too, so Prometheus
# verifies /metrics against its CA.
- --tls-cert-file=/var/run/webhook-certs/tls.crt
- --tls-private-key-file=/var/run/webhook-certs/tls.key
{{- end }}
{{- /* The Pipeline allowlists, always, as manifests/manager/deployment.yaml
passes them: the same values are rendered into the Pipeline admission
policy (cm.pipelineOptions). */}}
{{- range $flag, $value := include "cm.pipelineOptions" . | fromYaml }}
- {{ printf "--%s=%s" $flag $value | quote }}
{{- end }}
{{- if .Values.pipeline.createNamespaces }}
- --pipeline-create-namespaces=true
{{- end }}
{{- with .Values.pipeline.podSecurity }}
- {{ printf "--pipeline-pod-security=%s" . | quote }}
{{- end }}
{{- with .Values.ingress.allowedHosts }}
- {{ printf "--ingress-allowed-hosts=%s" (join "," .) | quote }}
{{- end }}
{{- with .Values.ingress.defaultDomain }}
- {{ printf "--ingress-default-domain=%s" . | quote }}
{{- end }}
{{- with .Values.app.ingressDomain }}
- {{ printf "--app-ingress-domain=%s" . | quote }}
{{- end }}
{{- if not .Values.app.invertEnableIngress }}
- --app-invert-enable-ingress=false
{{- end }}
{{- if .Values.cleanup.enabled }}
{{- with .Values.cleanup.interval }}
- {{ printf "--cleanup-interval=%s" . | quote }}
{{- end }}
{{- with .Values.cleanup.stalePeriod }}
- {{ printf "--cleanup-stale-period=%s" . | quote }}
{{- end }}
{{- if .Values.cleanup.dryRun }}
- --cleanup-dry-run=true
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Who admits Apps and Pipelines: "policies" (the API server,
manifests/policies) or "webhooks" (the manager). admission.by auto takes the policies where the
cluster serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicy
(Kubernetes 1.36 and later). */}}
{{- define "cm.appAdmission" -}}
{{- $by := .Values.admission.by -}}
{{- if eq $by "auto" -}}
{{- $api := .Capabilities.APIVersions -}}
{{- /* Against a cluster, helm knows every served kind. helm template knows
only group/versions: the Kubernetes version (--kube-version) decides. */ -}}
{{- $kinds := $api.Has "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration" -}}
{{- $served := $api.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
{{- ternary "policies" "webhooks" (or $served (and (not $kinds) (semverCompare ">=1.36-0" .Capabilities.KubeVersion.Version))) -}}
{{- else -}}
{{- $by -}}
{{- end -}}
{{- end }}

{{/* Whether Apps created through v1beta1 get enable_ingress inverted, as the
design notes ask: app.invertEnableIngress, which extraArgs'
--app-invert-enable-ingress=false also turns off. The webhook reads the
flag; the admission policies invert where their MutatingAdmissionPolicy is
rendered. */}}
{{- define "cm.invertEnableIngress" -}}
{{- if and .Values.app.invertEnableIngress (not (has "--app-invert-enable-ingress=false" .Values.extraArgs)) -}}
true
{{- end -}}
{{- end }}

{{/* The Pipeline controller's allowlists, by flag name: the manager's
--pipeline-* flags (cm.args) and the Pipeline admission policy's flag*
variables (admission-policies.yaml) are both rendered from this one map. */}}
{{- define "cm.pipelineOptions" -}}
pipeline-namespace: {{ .Values.pipeline.namespace | default "pipeline" | quote }}
pipeline-allowed-namespaces: {{ join "," .Values.pipeline.allowedNamespaces | quote }}
pipeline-allowed-nfs: {{ join "," .Values.pipeline.allowedNFS | quote }}
pipeline-allowed-images: {{ join "," .Values.pipeline.allowedImages | quote }}
pipeline-max-replicas: {{ int .Values.pipeline.maxReplicas | quote }}
{{- end }}
