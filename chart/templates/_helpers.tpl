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

{{/* The image: repository@digest when app.image.digest is set (the tag is then ignored), else repository:tag. */}}
{{- define "ark-broker.image" -}}
{{- with .Values.app.image }}
{{- if .digest }}
{{- printf "%s@%s" .repository .digest }}
{{- else }}
{{- printf "%s:%s" .repository (.tag | default $.Chart.AppVersion) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The CloudNativePG Cluster's name (cnpg.name, or "<fullname>-db"); its app Secret is "<name>-app". */}}
{{- define "ark-broker.cnpgName" -}}
{{- .Values.cnpg.name | default (printf "%s-db" (include "ark-broker.fullname" .)) | trunc 50 | trimSuffix "-" }}
{{- end }}

{{/* Exact host names of the Ingress and HTTPRoute (wildcards left out), one per line. */}}
{{- define "ark-broker.routeHosts" -}}
{{- if .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}
{{- if and .host (not (hasPrefix "*" .host)) }}
{{ .host }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.httpRoute.enabled }}
{{- range .Values.httpRoute.hostnames }}
{{- if not (hasPrefix "*" .) }}
{{ . }}
{{- end }}
{{- end }}
{{- end }}
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

{{/* Host names the page is served under (ARK_BROKER_ALLOWED_HOSTS): the Service's DNS names, loopback,
allowedHosts, and the Ingress's and HTTPRoute's exact host names. */}}
{{- define "ark-broker.allowedHosts" -}}
{{- $svc := include "ark-broker.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $routes := include "ark-broker.routeHosts" . | splitList "\n" | compact }}
{{- concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) "localhost" "127.0.0.1") .Values.allowedHosts $routes | uniq | join "," }}
{{- end }}

{{/* DATABASE_URL's value or valueFrom: the CloudNativePG app Secret's uri, database.urlSecretRef, or database.url. */}}
{{- define "ark-broker.databaseUrl" -}}
{{- $db := .Values.database }}
{{- if .Values.cnpg.enabled }}
{{- if or $db.url $db.urlSecretRef.name }}
{{- fail "cnpg.enabled: the broker uses the CloudNativePG Cluster's app Secret; leave database.url and database.urlSecretRef.name empty" }}
{{- end }}
valueFrom:
  secretKeyRef:
    name: {{ include "ark-broker.cnpgName" . }}-app
    key: uri
{{- else if $db.urlSecretRef.name }}
valueFrom:
  secretKeyRef:
    name: {{ $db.urlSecretRef.name }}
    key: {{ $db.urlSecretRef.key | default "database-url" }}
{{- else }}
value: {{ required "set database.urlSecretRef.name (a Secret holding the PostgreSQL URL), database.url, or cnpg.enabled" $db.url | quote }}
{{- end }}
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
