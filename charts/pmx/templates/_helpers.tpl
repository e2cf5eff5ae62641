{{/*
Names. pmx.fullname is "<release>-pmx", or the release name alone when it already holds the chart's
name (a release called "pmx" makes pmx-api, not pmx-pmx-api). It is trimmed to 40 characters so
that every Service name built on it ("-operator-metrics" is the longest suffix) stays within the
63 of a DNS label, and the shards' StatefulSet leaves room for its pods' revision-hash label.
*/}}
{{- define "pmx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pmx.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pmx.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels common to every object. */}}
{{- define "pmx.labels" -}}
helm.sh/chart: {{ include "pmx.chart" . }}
{{ include "pmx.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pmx
{{- end -}}

{{- define "pmx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pmx.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Labels and selector labels of one component: call with (dict "ctx" $ "component" "api").
*/}}
{{- define "pmx.componentLabels" -}}
{{ include "pmx.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pmx.componentSelectorLabels" -}}
{{ include "pmx.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The pmx image reference. */}}
{{- define "pmx.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{/* The operator's ServiceAccount. */}}
{{- define "pmx.operatorServiceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "pmx.fullname" .)) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The Service through which Prometheus scrapes one component's metrics: port 9090, named "metrics",
where every pmx process serves /metrics apart from its API (--metrics-addr, the operator's
--metrics-bind-address). It is a ClusterIP Service of its own, so that the front API's Service,
which may be a LoadBalancer, never carries the metrics port; the label pmx.dev/metrics sets it apart
from the component's other Services for its ServiceMonitor. Call with (dict "ctx" $ "component" "api").
*/}}
{{- define "pmx.metricsService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pmx.fullname" .ctx }}-{{ .component }}-metrics
  namespace: {{ .ctx.Release.Namespace }}
  labels:
    {{- include "pmx.componentLabels" . | nindent 4 }}
    pmx.dev/metrics: "true"
spec:
  type: ClusterIP
  selector:
    {{- include "pmx.componentSelectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: 9090
      targetPort: metrics
{{- end -}}

{{/* The shards' headless Service, the StatefulSet's governing Service. */}}
{{- define "pmx.shardServiceName" -}}
{{- printf "%s-shard" (include "pmx.fullname" .) -}}
{{- end -}}

{{- define "pmx.postgresName" -}}
{{- printf "%s-postgres" (include "pmx.fullname" .) -}}
{{- end -}}

{{/*
The database: exactly one of the bundled Postgres, database.url and database.existingSecret. The
check runs from every template that reads the URL, so that a wrong combination fails the render
with this message rather than producing pods that cannot start.
*/}}
{{- define "pmx.checkDatabase" -}}
{{- $external := or .Values.database.url .Values.database.existingSecret -}}
{{- if .Values.database.cloudnativepg.enabled -}}
{{- if or .Values.postgres.enabled $external -}}
{{- fail "database.cloudnativepg.enabled is true with postgres.enabled, database.url or database.existingSecret set: choose one database (set postgres.enabled=false and leave database.url and database.existingSecret empty)" -}}
{{- end -}}
{{- end -}}
{{- $external = or $external .Values.database.cloudnativepg.enabled -}}
{{- if and .Values.postgres.enabled $external -}}
{{- fail "postgres.enabled is true and database.url or database.existingSecret is set: choose the bundled Postgres or an external one (set postgres.enabled=false)" -}}
{{- end -}}
{{- if and (not .Values.postgres.enabled) (not $external) -}}
{{- fail "no database: set database.url or database.existingSecret for an external Postgres, or postgres.enabled=true for the bundled one" -}}
{{- end -}}
{{- if and .Values.database.url .Values.database.existingSecret -}}
{{- fail "database.url and database.existingSecret are both set: give one" -}}
{{- end -}}
{{- end -}}

{{/*
The CloudNativePG Cluster's name; CloudNativePG names its Services (<name>-rw, ...) and its
application Secret (<name>-app, whose uri points at <name>-rw) after it.
*/}}
{{- define "pmx.cnpgClusterName" -}}
{{- default (printf "%s-db" (include "pmx.fullname" .)) .Values.database.cloudnativepg.name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret and key holding the database URL. */}}
{{- define "pmx.databaseSecretName" -}}
{{- include "pmx.checkDatabase" . -}}
{{- if .Values.database.cloudnativepg.enabled -}}
{{- printf "%s-app" (include "pmx.cnpgClusterName" .) -}}
{{- else if .Values.postgres.enabled -}}
{{- include "pmx.postgresName" . -}}
{{- else if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "pmx.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "pmx.databaseSecretKey" -}}
{{- if .Values.database.cloudnativepg.enabled -}}
uri
{{- else if and (not .Values.postgres.enabled) .Values.database.existingSecret -}}
{{- .Values.database.existingSecretKey -}}
{{- else -}}
database-url
{{- end -}}
{{- end -}}

{{/* The Secret holding admin-token and internal-token. */}}
{{- define "pmx.tokensSecretName" -}}
{{- default (printf "%s-tokens" (include "pmx.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/*
pmx.secretValue returns value when it is set; otherwise the value under key in the Secret name of
the release's namespace, when that Secret exists (an upgrade: `lookup` reads the cluster);
otherwise a new random string of 32 letters and digits (an install, or `helm template`, where
`lookup` finds nothing). So a generated secret is generated once and then kept.
Call with (dict "ctx" $ "name" "<secret>" "key" "<key>" "value" <given value>).
*/}}
{{- define "pmx.secretValue" -}}
{{- if .value -}}
{{- .value -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .name -}}
{{- $data := dig "data" .key "" ($existing | default dict) -}}
{{- if $data -}}
{{- $data | b64dec -}}
{{- else -}}
{{- randAlphaNum 32 -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Annotations that roll a component's pods when the configuration they read from Secrets changes
through the chart's values (generated values do not change, so they need no hash).
*/}}
{{- define "pmx.configChecksum" -}}
checksum/config: {{ list .Values.database .Values.secrets .Values.postgres.enabled .Values.postgres.password .Values.postgres.username .Values.postgres.database | toJson | sha256sum }}
{{- end -}}

{{/*
The environment every pmx process reads its database from. Call with the root context.
*/}}
{{- define "pmx.databaseEnv" -}}
- name: PMX_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "pmx.databaseSecretName" . }}
      key: {{ include "pmx.databaseSecretKey" . }}
{{- end -}}

{{- define "pmx.tokenEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "pmx.tokensSecretName" .ctx }}
      key: {{ .key }}
{{- end -}}

{{/*
With the bundled Postgres, an init container that waits until it accepts connections, so that the
pmx processes (which fail fast when the database is unreachable) start once instead of crash-looping
while Postgres initializes. It runs the Postgres image's pg_isready, which needs a user name: it runs
as 65532, which that image has no passwd entry for.
*/}}
{{- define "pmx.waitForPostgres" -}}
{{- if .Values.postgres.enabled }}
- name: wait-for-postgres
  image: {{ printf "%s:%s" .Values.postgres.image.repository (.Values.postgres.image.tag | toString) }}
  imagePullPolicy: {{ .Values.postgres.image.pullPolicy }}
  command:
    - sh
    - -c
    - until pg_isready --quiet --host={{ include "pmx.postgresName" . }} --port=5432 --username={{ .Values.postgres.username }} --dbname={{ .Values.postgres.database }} --timeout=2; do echo "waiting for {{ include "pmx.postgresName" . }}"; sleep 2; done
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  resources:
    requests:
      cpu: 10m
      memory: 16Mi
    limits:
      memory: 64Mi
{{- end }}
{{- end -}}

{{/*
Scheduling fields of a pod spec, from a component's values: call with (dict "ctx" $ "component"
"api" "values" $api). The component's priorityClassName, or else the chart's. The front API's
replicas, unless its values give topologySpreadConstraints, spread softly over nodes and zones
(api.defaultTopologySpread): a lost node or zone takes as few of them as the cluster allows, and
a cluster too small to spread them still schedules them. matchLabelKeys counts the pods of the
rollout's own ReplicaSet only, so that a rolling update spreads the new pods too.
*/}}
{{- define "pmx.scheduling" -}}
{{- $v := .values }}
{{- with ($v.priorityClassName | default .ctx.Values.priorityClassName) }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml $v.topologySpreadConstraints | nindent 2 }}
{{- else if $v.defaultTopologySpread }}
topologySpreadConstraints:
{{- range $key := list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
  - maxSkew: 1
    topologyKey: {{ $key }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "pmx.componentSelectorLabels" $ | nindent 8 }}
    matchLabelKeys:
      - pod-template-hash
{{- end }}
{{- end }}
{{- end -}}

{{/*
The spec of a component's PodDisruptionBudget, from its podDisruptionBudget values: minAvailable
when given, otherwise maxUnavailable.
*/}}
{{- define "pmx.pdbSpec" -}}
{{- $pdb := .values.podDisruptionBudget }}
{{- with $pdb.minAvailable }}
minAvailable: {{ . }}
{{- else }}
maxUnavailable: {{ $pdb.maxUnavailable }}
{{- end }}
selector:
  matchLabels:
    {{- include "pmx.componentSelectorLabels" . | nindent 4 }}
{{- end -}}

{{- define "pmx.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The selector of the pods of the operator's ShardPools (controllers/shardpool_objects.go labels
them): shard pods with a pool, which carry none of the release's instance labels.
*/}}
{{- define "pmx.poolShardSelector" -}}
matchLabels:
  app.kubernetes.io/component: shard
matchExpressions:
  - key: pmx.dev/shard-pool
    operator: Exists
{{- end }}
