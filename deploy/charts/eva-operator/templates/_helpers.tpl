{{/* The operator's image: by digest when one is set. */}}
{{- define "eva-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The environment's files as JSON (exact, trailing newlines kept): the values' own, or those shipped for .Values.env. */}}
{{- define "eva-operator.environmentFiles" -}}
{{- if .Values.environmentFiles -}}
{{- toJson .Values.environmentFiles -}}
{{- else -}}
{{- $files := dict -}}
{{- range $path, $_ := .Files.Glob (printf "files/environments/%s/*" .Values.env) -}}
{{- $_ := set $files (base $path) ($.Files.Get $path) -}}
{{- end -}}
{{- if not $files -}}
{{- fail (printf "env %q: the chart ships no such environment (files/environments/) and environmentFiles is empty" .Values.env) -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}
{{- end -}}

{{/* A grant's holder in eva-tenant-entitlements: its code, or <CODE>@<namespace> for a grant to one requester namespace (entitlement.Rules.Params). Takes (list code grant). */}}
{{- define "eva-operator.grantee" -}}
{{- $code := index . 0 -}}{{- $grant := index . 1 -}}
{{- if $grant.namespace -}}{{ printf "%s@%s" $code $grant.namespace }}{{- else -}}{{ $code }}{{- end -}}
{{- end -}}
