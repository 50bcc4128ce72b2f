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

{{/* The CloudNativePG Pooler's name, "<cluster>-pooler-rw" (at most 60 characters: the cluster's is at most 50);
it is also the name of its Service. */}}
{{- define "ark-broker.poolerName" -}}
{{- printf "%s-pooler-rw" (include "ark-broker.cnpgName" .) }}
{{- end }}

{{/* Connections CloudNativePG keeps for itself on each instance besides superuser_reserved_connections and
reserved_connections: the instance manager's pools (up to 3 connections for each database it opens: probes,
declarative roles, replication slots, online backups) and its metrics exporter, which opens the databases its
queries target. The standbys' streaming replication is not counted: walsenders have had their own limit,
max_wal_senders, since PostgreSQL 12. */}}
{{- define "ark-broker.cnpgOwnConnections" -}}10{{- end }}

{{/* The database connections the broker's pods need and what the database allows, as JSON; fails rendering, with
the numbers and the fix, when they do not fit. A pod holds up to its pool, its LISTEN connection and, at start-up,
the migration's: pool + 2. Pods: replicaCount (autoscaling.maxReplicas with autoscaling) plus
updateStrategy.maxSurge, the new pods a rolling update starts beside the old ones.
The pool: database.poolMax when set (at least 2, as the broker takes it). Empty (the default), the largest that
fits what the database leaves the pods, at most the broker's default of 10 and at least its least of 2:
min(10, floor(limit / pods) - 2), limit below; 10 where the chart sizes PostgreSQL itself (CloudNativePG with
max_connections empty), PostgreSQL does not see the pool (cnpg.pooler), or the check is off.
- CloudNativePG: the limit is cnpg.parameters.max_connections less superuser_reserved_connections (3),
  reserved_connections (0) and CloudNativePG's own (ark-broker.cnpgOwnConnections); with it empty the chart sets
  max_connections to max(100, what is needed + those). With cnpg.pooler, PostgreSQL sees per PgBouncer instance
  default_pool_size + reserve_pool_size + 1 (its auth_query connection) and per broker pod 2 direct connections
  (LISTEN, migration); and every PgBouncer instance must take all the pods' pooled connections (max_client_conn),
  which it does when the other instance is down or restarting.
- An external database: database.maxConnections less database.reservedConnections; 0 turns the check off.
Keys: pods, podsText, poolMax (the pool, DATABASE_POOL_MAX), poolDerived (database.poolMax was empty), perPod,
needed, limit (0: unchecked), maxConnections (CNPG's, a string), computed (the chart set it), poolerParameters
(CNPG pooler: the PgBouncer parameters with the derived ones filled in). */}}
{{- define "ark-broker.connections" -}}
{{- $v := .Values }}
{{- $db := $v.database }}
{{- $replicas := int $v.replicaCount }}
{{- $replicasText := printf "replicaCount %d" $replicas }}
{{- if $v.autoscaling.enabled }}
{{- $replicas = int $v.autoscaling.maxReplicas }}
{{- $replicasText = printf "autoscaling.maxReplicas %d" $replicas }}
{{- end }}
{{- $maxSurge := $v.updateStrategy.maxSurge }}
{{- $surge := 0 }}
{{- if kindIs "string" $maxSurge }}
{{- /* A percentage of the replicas, rounded up (as the Deployment controller does). */ -}}
{{- $surge = div (add (mul $replicas (int (trimSuffix "%" $maxSurge))) 99) 100 }}
{{- else }}
{{- $surge = int $maxSurge }}
{{- end }}
{{- $pods := add $replicas $surge }}
{{- $podsText := printf "%d broker pods (%s + updateStrategy.maxSurge %d during a rolling update)" $pods $replicasText $surge }}
{{- $params := $v.cnpg.parameters | default dict }}
{{- $superuser := int (get $params "superuser_reserved_connections" | default "3") }}
{{- $reservedConns := int (get $params "reserved_connections" | default "0") }}
{{- $own := int (include "ark-broker.cnpgOwnConnections" .) }}
{{- $cnpgReserved := add $superuser $reservedConns $own }}
{{- /* What the database leaves the pods when the pool must fit it; 0: nothing to fit. */ -}}
{{- $budget := 0 }}
{{- if $v.cnpg.enabled }}
{{- if and (not $v.cnpg.pooler.enabled) (get $params "max_connections") }}
{{- $budget = sub (int (get $params "max_connections")) $cnpgReserved }}
{{- end }}
{{- else if gt (int $db.maxConnections) 0 }}
{{- $budget = sub (int $db.maxConnections) (int $db.reservedConnections) }}
{{- end }}
{{- $derived := kindIs "invalid" $db.poolMax }}
{{- $pool := 10 }}
{{- if not $derived }}
{{- $pool = max 2 (int $db.poolMax) }}
{{- else if gt $budget 0 }}
{{- $pool = max 2 (min 10 (sub (div $budget (max 1 $pods)) 2)) }}
{{- end }}
{{- $perPodText := printf "(database.poolMax %d + 2: the LISTEN connection and the migration at start-up)" $pool }}
{{- $lower := "lower database.poolMax or the replicas" }}
{{- if $derived }}
{{- $perPodText = printf "(database.poolMax empty: a pool of %d, the broker's least, + 2: the LISTEN connection and the migration at start-up)" $pool }}
{{- $lower = "lower the replicas" }}
{{- end }}
{{- $out := dict "pods" $pods "podsText" $podsText "poolMax" $pool "poolDerived" $derived "perPod" (add $pool 2) "limit" 0 "computed" false }}
{{- if $v.cnpg.enabled }}
{{- $reserved := $cnpgReserved }}
{{- $reservedText := printf "superuser_reserved_connections %d, reserved_connections %d and %d for CloudNativePG's instance manager" $superuser $reservedConns $own }}
{{- $needed := 0 }}
{{- $neededText := "" }}
{{- $fix := "" }}
{{- if $v.cnpg.pooler.enabled }}
{{- $pooler := $v.cnpg.pooler }}
{{- $instances := int $pooler.instances }}
{{- $pp := deepCopy ($pooler.parameters | default dict) }}
{{- $clientConns := mul $pods $pool }}
{{- if not (hasKey $pp "default_pool_size") }}{{- $_ := set $pp "default_pool_size" (toString (min 20 $clientConns)) }}{{- end }}
{{- if not (hasKey $pp "max_client_conn") }}{{- $_ := set $pp "max_client_conn" (toString (max 100 $clientConns)) }}{{- end }}
{{- $poolSize := int (get $pp "default_pool_size") }}
{{- $reservePool := int (get $pp "reserve_pool_size" | default "0") }}
{{- $maxClient := int (get $pp "max_client_conn") }}
{{- if gt $clientConns $maxClient }}
{{- fail (printf "database connections: %s × database.poolMax %d = %d pooled connections, but cnpg.pooler.parameters.max_client_conn is %d: each PgBouncer instance must accept them all (the Service may send every connection to one, and does while another restarts). Raise max_client_conn to at least %d (or leave it empty: the chart then sets max(100, %d)), or lower database.poolMax or the replicas." $podsText $pool $clientConns $maxClient $clientConns $clientConns) }}
{{- end }}
{{- $needed = add (mul $instances (add $poolSize $reservePool 1)) (mul $pods 2) }}
{{- $neededText = printf "cnpg.pooler.instances %d × (default_pool_size %d + reserve_pool_size %d + 1 for PgBouncer's auth_query) + %s × 2 direct connections (LISTEN, migration) = %d connections" $instances $poolSize $reservePool $podsText $needed }}
{{- $fix = "lower cnpg.pooler.parameters.default_pool_size or cnpg.pooler.instances" }}
{{- $_ := set $out "poolerParameters" $pp }}
{{- else }}
{{- $needed = mul $pods (add $pool 2) }}
{{- $neededText = printf "%s × %s = %d connections" $podsText $perPodText $needed }}
{{- $fix = printf "%s, or turn on cnpg.pooler (PgBouncer: PostgreSQL then sees its pool, not every replica's)" $lower }}
{{- end }}
{{- $_ := set $out "needed" $needed }}
{{- with get $params "max_connections" }}
{{- $max := int . }}
{{- $limit := sub $max $reserved }}
{{- if gt $needed $limit }}
{{- fail (printf "database connections: %s, more than cnpg.parameters.max_connections %d leaves them: %d, after %s. Raise max_connections to at least %d, leave it empty (the chart then sets it from these numbers), or %s." $neededText $max $limit $reservedText (add $needed $reserved) $fix) }}
{{- end }}
{{- $_ := set $out "limit" $limit }}
{{- $_ := set $out "maxConnections" (toString $max) }}
{{- else }}
{{- $max := max 100 (add $needed $reserved) }}
{{- $_ := set $out "limit" (sub $max $reserved) }}
{{- $_ := set $out "maxConnections" (toString $max) }}
{{- $_ := set $out "computed" true }}
{{- end }}
{{- else if gt (int $db.maxConnections) 0 }}
{{- $needed := mul $pods (add $pool 2) }}
{{- $max := int $db.maxConnections }}
{{- $limit := sub $max (int $db.reservedConnections) }}
{{- if gt $needed $limit }}
{{- fail (printf "database connections: %s × %s = %d connections, more than PostgreSQL's max_connections leaves them: database.maxConnections %d - database.reservedConnections %d = %d. %s, or raise the server's max_connections and set database.maxConnections to it (behind a pooler such as PgBouncer, database.maxConnections: 0 turns this check off)." $podsText $perPodText $needed $max (int $db.reservedConnections) $limit (printf "%s%s" (substr 0 1 $lower | upper) (substr 1 -1 $lower))) }}
{{- end }}
{{- $_ := set $out "needed" $needed }}
{{- $_ := set $out "limit" $limit }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* The broker's database environment: DATABASE_URL and, when there is one, DATABASE_LISTEN_URL (the direct URL for
the LISTEN connection and session-level work). With CloudNativePG, DATABASE_URL is the app Secret's uri (the -rw
Service), or, with cnpg.pooler, the Pooler's Service with the app user's credentials from that Secret (Kubernetes
expands $(VAR) from the env vars before it; the operator generates letters and digits only, nothing a URL must
escape) and DATABASE_LISTEN_URL the uri. Otherwise database.urlSecretRef or database.url, and
database.listenUrlSecretRef or database.listenUrl. */}}
{{- define "ark-broker.databaseEnv" -}}
{{- $db := .Values.database }}
{{- if .Values.cnpg.enabled }}
{{- if or $db.url $db.urlSecretRef.name $db.listenUrl $db.listenUrlSecretRef.name }}
{{- fail "cnpg.enabled: the broker uses the CloudNativePG Cluster's app Secret; leave database.url and database.urlSecretRef.name empty, and database.listenUrl and database.listenUrlSecretRef.name" }}
{{- end }}
{{- $secret := printf "%s-app" (include "ark-broker.cnpgName" .) }}
{{- if .Values.cnpg.pooler.enabled }}
{{- range $name, $key := dict "CNPG_APP_USERNAME" "username" "CNPG_APP_PASSWORD" "password" "CNPG_APP_DBNAME" "dbname" }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
{{- end }}
- name: DATABASE_URL
  value: {{ printf "postgresql://$(CNPG_APP_USERNAME):$(CNPG_APP_PASSWORD)@%s.%s:5432/$(CNPG_APP_DBNAME)" (include "ark-broker.poolerName" .) .Release.Namespace | quote }}
- name: DATABASE_LISTEN_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: uri
{{- else }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: uri
{{- end }}
{{- else }}
{{- if .Values.cnpg.pooler.enabled }}
{{- fail "cnpg.pooler.enabled needs cnpg.enabled (the Pooler is CloudNativePG's, in front of the chart's Cluster); for a pooler of your own point database.url or urlSecretRef at it and database.listenUrl or listenUrlSecretRef at the database" }}
{{- end }}
- name: DATABASE_URL
{{- if $db.urlSecretRef.name }}
  valueFrom:
    secretKeyRef:
      name: {{ $db.urlSecretRef.name }}
      key: {{ $db.urlSecretRef.key | default "database-url" }}
{{- else }}
  value: {{ required "set database.urlSecretRef.name (a Secret holding the PostgreSQL URL), database.url, or cnpg.enabled" $db.url | quote }}
{{- end }}
{{- if $db.listenUrlSecretRef.name }}
- name: DATABASE_LISTEN_URL
  valueFrom:
    secretKeyRef:
      name: {{ $db.listenUrlSecretRef.name }}
      key: {{ $db.listenUrlSecretRef.key | default "listen-url" }}
{{- else if $db.listenUrl }}
- name: DATABASE_LISTEN_URL
  value: {{ $db.listenUrl | quote }}
{{- end }}
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

{{- /* Bytes of a Kubernetes memory quantity ("512Mi", "1G", "1073741824"); "" when it is empty or not one. */ -}}
{{- define "ark-broker.bytes" -}}
{{- $quantity := toString (. | default "") -}}
{{- $parts := regexFindAll "^([0-9]+)([KMGT]i?|k)?$" $quantity 1 -}}
{{- if $parts -}}
{{- $number := regexFind "^[0-9]+" $quantity -}}
{{- $unit := trimPrefix $number $quantity -}}
{{- $factors := dict "" 1 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- mul (int64 $number) (get $factors $unit) -}}
{{- end -}}
{{- end }}

{{/* Each CloudNativePG instance's volume: cnpg.storage.size, or when empty the size cnpg.storage.sizing asks for
(docs/retention.md, "Sizing the disk for chunks"): the most chunk rows kept (rate × (retention + 1.5 buckets of
retention / 12, at least a minute)) at 540 bytes, in whole GiB, twice over for the other tables and headroom,
plus 1 GiB of WAL; at least 10Gi. */}}
{{- define "ark-broker.cnpgStorageSize" -}}
{{- with .Values.cnpg.storage }}
{{- if .size }}
{{- .size }}
{{- else }}
{{- $retention := int .sizing.streamRetentionSeconds }}
{{- $bucket := min $retention (max 60 (div $retention 12)) }}
{{- $rows := mul (int .sizing.chunksPerSecond) (add $retention (div (mul $bucket 3) 2)) }}
{{- $gib := div (add (mul $rows 540) 1073741823) 1073741824 }}
{{- printf "%dGi" (max 10 (add (mul $gib 2) 1)) }}
{{- end }}
{{- end }}
{{- end }}
