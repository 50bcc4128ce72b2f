{{/* Names, labels and computed values shared by the templates. */}}

{{- define "ark-broker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ark-broker.fullname" -}}
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

{{- define "ark-broker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ark-broker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ark-broker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ark-broker.labels" -}}
helm.sh/chart: {{ include "ark-broker.chart" . }}
{{ include "ark-broker.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "ark-broker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ark-broker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ark-broker.image" -}}
{{- printf "%s:%s" .Values.app.image.repository (.Values.app.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* ARK_BROKER_MCP_ALLOWED_HOSTS: mcp.allowedHosts, or the Service's DNS names plus loopback. */}}
{{- define "ark-broker.mcpAllowedHosts" -}}
{{- if .Values.mcp.allowedHosts }}
{{- join "," .Values.mcp.allowedHosts }}
{{- else }}
{{- $svc := include "ark-broker.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) "localhost" "127.0.0.1" | join "," }}
{{- end }}
{{- end }}

{{/* Host names the page is served under (ARK_BROKER_ALLOWED_HOSTS): the Service's DNS names, loopback, and
allowedHosts (an Ingress's names). */}}
{{- define "ark-broker.allowedHosts" -}}
{{- $svc := include "ark-broker.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) "localhost" "127.0.0.1") .Values.allowedHosts | join "," }}
{{- end }}

{{/* The Authorization header Ark sends to the broker, from auth.clientAuthorizationSecret (nothing when unset). */}}
{{- define "ark-broker.authorizationHeader" -}}
{{- with .Values.auth.clientAuthorizationSecret }}
{{- if .name }}
- name: Authorization
  value:
    valueFrom:
      secretKeyRef:
        name: {{ .name }}
        key: {{ .key | default "authorization" }}
{{- end }}
{{- end }}
{{- end }}
