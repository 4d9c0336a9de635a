{{/* The module's name: its Service name, which the tenant Ingress routes to. */}}
{{- define "eva.module" -}}
{{- .Values.service.name -}}
{{- end -}}

{{- define "eva.labels" -}}
app.kubernetes.io/name: {{ include "eva.module" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
eva.aidonow.com/capsule: {{ required "capsule.code is set by Eva" .Values.capsule.code }}
{{- end -}}

{{- define "eva.selector" -}}
app.kubernetes.io/name: {{ include "eva.module" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eva.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}
