{{/*
Labels Helm adds to every object, on top of the ones config/ sets. The
comparison with kustomize (config/helm_test.go) drops exactly these three.
*/}}
{{- define "bootroll.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of a component's objects: bootroll.labels (dict "ctx" . "component" "controller"). */}}
{{- define "bootroll.labels" -}}
app.kubernetes.io/name: bootroll
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{ include "bootroll.helmLabels" .ctx }}
{{- end -}}

{{/* The image reference repository[:tag][@digest]. */}}
{{- define "bootroll.image" -}}
{{- .repository -}}
{{- with .tag }}:{{ . }}{{ end -}}
{{- with .digest }}@{{ . }}{{ end -}}
{{- end -}}

{{- define "bootroll.namespace" -}}
{{ .Values.namespace.name }}
{{- end -}}
