{{- /* helm create's naming: nameOverride replaces the chart's name (in the selector
labels and the fullname), fullnameOverride the whole fullname every object is named
from. */ -}}
{{- define "shoal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shoal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "shoal.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "shoal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shoal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- /* The operator's ServiceAccount, created by the chart or by its admin: the given
name, else the fullname (never the namespace's default account). */ -}}
{{- define "shoal.serviceAccountName" -}}
{{- default (include "shoal.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- /* part-of stays "shoal" whatever nameOverride says: `shoal doctor` finds the
operator by it (shoal.doctor.checks.OPERATOR_SELECTOR). */ -}}
{{- define "shoal.labels" -}}
{{ include "shoal.selectorLabels" . }}
app.kubernetes.io/part-of: shoal
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /* The operator's image: by digest when one is given (air-gapped mirrors, pinned
releases), else by tag. */ -}}
{{- define "shoal.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- /* On what outlives `helm uninstall` (the gateways' namespace and their agent's
identity): Helm keeps it, and so do Argo CD and Flux when they own the release
(shoal.api.constants.KEPT_ON_UNINSTALL). */ -}}
{{- define "shoal.keptOnUninstall" -}}
helm.sh/resource-policy: keep
argocd.argoproj.io/sync-options: Prune=false,Delete=false
kustomize.toolkit.fluxcd.io/prune: disabled
{{- end -}}
