{{/* The chart's name, truncated to the 63 characters Kubernetes names allow. */}}
{{- define "ragmend.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: <release>-ragmend, or the release name when it already says ragmend. */}}
{{- define "ragmend.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ragmend.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ragmend.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ragmend.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ragmend.labels" -}}
helm.sh/chart: {{ include "ragmend.chart" . }}
{{ include "ragmend.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ragmend.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "ragmend.claimName" -}}
{{- default (include "ragmend.fullname" .) .Values.persistence.existingClaim }}
{{- end }}

{{/* The port ragmend listens on: config.server.port, else ragmend's default. */}}
{{- define "ragmend.port" -}}
{{- dig "server" "port" 8000 .Values.config }}
{{- end }}
