{{/* The chart name (app.kubernetes.io/name). */}}
{{- define "hudi-keeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: the release name if it contains the chart name, else <release>-<chart>. */}}
{{- define "hudi-keeper.fullname" -}}
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

{{/* The selector: the base's app.kubernetes.io/name, and the release (several may share a namespace). */}}
{{- define "hudi-keeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hudi-keeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels: the base's (name, component) plus Helm's. */}}
{{- define "hudi-keeper.labels" -}}
{{ include "hudi-keeper.selectorLabels" . }}
app.kubernetes.io/component: table-service
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* "true" when several replicas share the tables (cluster.mode static or zookeeper): a StatefulSet. */}}
{{- define "hudi-keeper.clustered" -}}
{{- if ne (toString .Values.cluster.mode) "none" }}true{{ end }}
{{- end }}

{{/* The headless Service naming the StatefulSet's pods (hudi-keeper-2.hudi-keeper-headless). */}}
{{- define "hudi-keeper.headlessServiceName" -}}
{{- printf "%s-headless" (include "hudi-keeper.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Refuse the values the daemon or Kubernetes would refuse later (renders nothing). */}}
{{- define "hudi-keeper.validate" -}}
{{- $mode := toString .Values.cluster.mode }}
{{- if eq (int .Values.containerPort) (int .Values.probePort) }}
{{- fail (printf "probePort: %v is containerPort's; the probe listener (server.probe_listen) needs a port of its own" .Values.probePort) }}
{{- end }}
{{- if eq (int .Values.service.port) (int .Values.service.probePort) }}
{{- fail (printf "service.probePort: %v is service.port's; the Service needs a port for each" .Values.service.probePort) }}
{{- end }}
{{- if and .Values.config.toml (not (regexMatch `(?m)^[ \t]*probe_listen[ \t]*=` .Values.config.toml)) }}
{{- fail (printf "config.toml: set probe_listen = \"0.0.0.0:%v\" in [server]: the probes and the PodMonitor or ServiceMonitor use the port probes (probePort)" (int .Values.probePort)) }}
{{- end }}
{{- $zk := list "zookeeper_path" "zookeeper_url" "zookeeper_session_timeout" }}
{{- if eq $mode "none" }}
{{- if ne (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount: %v replicas need cluster.mode static or zookeeper (with mode none, two daemons on the same tables would only contend for the same locks)" .Values.replicaCount) }}
{{- end }}
{{- end }}
{{- if ne $mode "zookeeper" }}
{{- range $k := $zk }}
{{- if get $.Values.cluster $k }}
{{- fail (printf "cluster.%s is for cluster.mode zookeeper, not %s" $k $mode) }}
{{- end }}
{{- end }}
{{- end }}
{{- if include "hudi-keeper.clustered" . }}
{{- if and .Values.persistence.enabled .Values.persistence.existingClaim }}
{{- fail (printf "persistence.existingClaim: the replicas of cluster.mode %s need a state folder each; leave it empty for a claim per replica (volumeClaimTemplates)" $mode) }}
{{- end }}
{{- if .Values.config.toml }}
{{- if not (regexMatch `(?m)^[ \t]*\[cluster\]` .Values.config.toml) }}
{{- fail (printf "config.toml: cluster.mode %s needs the file's own [cluster] section (mode = %q%s)" $mode $mode (ternary (printf ", replicas = %d" (int .Values.replicaCount)) "" (eq $mode "static"))) }}
{{- end }}
{{- else if eq $mode "zookeeper" }}
{{- $lock := default (dict) (get (default (dict) .Values.config.defaults) "lock") }}
{{- if not (or .Values.cluster.zookeeper_url (get $lock "zookeeper_url")) }}
{{- fail "cluster.mode zookeeper: set cluster.zookeeper_url, or config.defaults.lock.zookeeper_url (the daemon falls back to it)" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hudi-keeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hudi-keeper.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hudi-keeper.secretName" -}}
{{- default (printf "%s-api" (include "hudi-keeper.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "hudi-keeper.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
hudi-keeper.toml. The chart writes TOML itself rather than with toToml, which writes the numbers
Helm reads from values files (float64) as floats: `heartbeat_tolerable_misses = 2.0` would stop
the daemon at start.
*/}}
{{- define "hudi-keeper.config" -}}
{{- if .Values.config.toml }}
{{- .Values.config.toml }}
{{- else }}
{{- $server := merge (dict "listen" (printf "0.0.0.0:%v" (int .Values.containerPort)) "probe_listen" (printf "0.0.0.0:%v" (int .Values.probePort)) "state_dir" "/var/lib/hudi-keeper") (deepCopy (default (dict) .Values.config.server)) }}
{{- range $k := list "auth_token" }}
{{- if hasKey $server $k }}
{{- fail (printf "config.server.%s: set the token with auth.token or auth.existingSecret, not in the ConfigMap" $k) }}
{{- end }}
{{- end -}}
# Written by the hudi-keeper Helm chart from .Values.config (docs/operations.md has every key).
# The token for the mutating API comes from the Secret {{ include "hudi-keeper.secretName" . }} (HUDI_KEEPER_SERVER__AUTH_TOKEN).
[server]
{{- include "hudi-keeper.tomlTable" (dict "path" (list "server") "table" $server) }}
{{- if eq (toString .Values.cluster.mode) "static" }}

[cluster]
mode = "static"
# The StatefulSet's spec.replicas (replicaCount). Each replica's index is the trailing -N of its
# pod name ($POD_NAME).
replicas = {{ int .Values.replicaCount }}
{{- else if eq (toString .Values.cluster.mode) "zookeeper" }}

[cluster]
mode = "zookeeper"
{{- if not .Values.cluster.zookeeper_url }}
# No zookeeper_url: the daemon uses [defaults.lock]'s.
{{- end }}
{{- range $k := list "zookeeper_url" "zookeeper_path" "zookeeper_session_timeout" }}
{{- with get $.Values.cluster $k }}
{{ $k }} = {{ include "hudi-keeper.tomlValue" . }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.config.defaults }}

[defaults]
{{- include "hudi-keeper.tomlTable" (dict "path" (list "defaults") "table" .Values.config.defaults) }}
{{- end }}
{{- range .Values.config.tables }}

[[tables]]
{{- include "hudi-keeper.tomlTable" (dict "path" (list "tables") "table" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/* A TOML key: bare when it may be, else a quoted string. */}}
{{- define "hudi-keeper.tomlKey" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "hudi-keeper.tomlPath" -}}
{{- $keys := list }}
{{- range . }}{{ $keys = append $keys (include "hudi-keeper.tomlKey" .) }}{{ end }}
{{- join "." $keys }}
{{- end }}

{{/* A TOML value: a string (JSON's escapes are TOML's), a boolean, an integer, a float or an array of these. */}}
{{- define "hudi-keeper.tomlValue" -}}
{{- if kindIs "string" . }}{{ toJson . }}
{{- else if kindIs "bool" . }}{{ . }}
{{- else if kindIs "float64" . }}{{ if eq . (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else if or (kindIs "int" .) (kindIs "int64" .) }}{{ . }}
{{- else if kindIs "slice" . }}[{{ range $i, $v := . }}{{ if $i }}, {{ end }}{{ include "hudi-keeper.tomlValue" $v }}{{ end }}]
{{- else }}{{ fail (printf "config: cannot write %v (%s) in hudi-keeper.toml" . (kindOf .)) }}
{{- end }}
{{- end }}

{{/* "true" when the value is a non-empty list of maps (a TOML array of tables). */}}
{{- define "hudi-keeper.isTableArray" -}}
{{- if and (kindIs "slice" .) (gt (len .) 0) }}
{{- $all := true }}
{{- range . }}{{ if not (kindIs "map" .) }}{{ $all = false }}{{ end }}{{ end }}
{{- if $all }}true{{ end }}
{{- end }}
{{- end }}

{{/* The keys of one TOML table (dict "path" <list of keys> "table" <map>): name and uri first, then the other values, then sub-tables. */}}
{{- define "hudi-keeper.tomlTable" -}}
{{- $path := .path }}
{{- $table := .table }}
{{- $first := list "name" "uri" }}
{{- range $k := $first }}
{{- if and (hasKey $table $k) (not (kindIs "invalid" (get $table $k))) }}
{{ $k }} = {{ include "hudi-keeper.tomlValue" (get $table $k) }}
{{- end }}
{{- end }}
{{- range $k, $v := $table }}
{{- if not (or (has $k $first) (kindIs "invalid" $v) (kindIs "map" $v) (include "hudi-keeper.isTableArray" $v)) }}
{{ include "hudi-keeper.tomlKey" $k }} = {{ include "hudi-keeper.tomlValue" $v }}
{{- end }}
{{- end }}
{{- range $k, $v := $table }}
{{- if kindIs "map" $v }}
{{- $p := append $path $k }}

[{{ include "hudi-keeper.tomlPath" $p }}]
{{- include "hudi-keeper.tomlTable" (dict "path" $p "table" $v) }}
{{- end }}
{{- end }}
{{- range $k, $v := $table }}
{{- if include "hudi-keeper.isTableArray" $v }}
{{- $p := append $path $k }}
{{- range $v }}

[[{{ include "hudi-keeper.tomlPath" $p }}]]
{{- include "hudi-keeper.tomlTable" (dict "path" $p "table" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
