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
{{- $server := merge (dict "listen" (printf "0.0.0.0:%v" (int .Values.containerPort)) "state_dir" "/var/lib/hudi-keeper") (deepCopy (default (dict) .Values.config.server)) }}
{{- range $k := list "auth_token" }}
{{- if hasKey $server $k }}
{{- fail (printf "config.server.%s: set the token with auth.token or auth.existingSecret, not in the ConfigMap" $k) }}
{{- end }}
{{- end -}}
# Written by the hudi-keeper Helm chart from .Values.config (docs/operations.md has every key).
# The token for the mutating API comes from the Secret {{ include "hudi-keeper.secretName" . }} (HUDI_KEEPER_SERVER__AUTH_TOKEN).
[server]
{{- include "hudi-keeper.tomlTable" (dict "path" (list "server") "table" $server) }}
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
