{{/*
The chart name, or nameOverride.
*/}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: "<release>-berth", or just the release name when it already
contains the chart name. Truncated to leave room for the longest suffix ("-postgresql", which
also names the StatefulSet's pods and claims) within the 63 characters of a DNS label.
*/}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "berth.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object. The CRD templates, which `npm run generate` writes, include them too.
*/}}
{{- define "berth.labels" -}}
helm.sh/chart: {{ include "berth.chart" . }}
{{ include "berth.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- end }}

{{/*
Labels that select pods. A Deployment's selector cannot change after it is created, so these
carry neither the chart version nor the app version: an upgrade would fail otherwise. Each
component adds app.kubernetes.io/component beside them.
*/}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The Berth image: [registry/]repository, then @digest when one is set (it pins the content,
so the tag no longer matters) or :tag (default: the chart's appVersion).
*/}}
{{- define "berth.image" -}}
{{- $image := .Values.image }}
{{- $repository := $image.repository }}
{{- with $image.registry }}{{ $repository = printf "%s/%s" . $image.repository }}{{ end }}
{{- if $image.digest }}
{{- printf "%s@%s" $repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $repository ($image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount a component runs as and its Roles are bound to. Called with
(dict "root" $ "component" "apiserver").
*/}}
{{- define "berth.serviceAccountName" -}}
{{- $account := (index .root.Values .component).serviceAccount }}
{{- if $account.create }}
{{- $account.name | default (printf "%s-%s" (include "berth.fullname" .root) .component) }}
{{- else if $account.name }}
{{- $account.name }}
{{- else }}
{{- fail (printf "%s.serviceAccount.create is false: set %s.serviceAccount.name to the ServiceAccount the %s should run as (the chart binds its Roles to it; it does not fall back to the namespace's default account)." .component .component .component) }}
{{- end }}
{{- end }}

{{/*
The enabled probes of a component, as container fields. Called with
(dict "root" $ "component" "apiserver").
*/}}
{{- define "berth.probes" -}}
{{- $values := index .root.Values .component }}
{{- range $probe := list "startupProbe" "livenessProbe" "readinessProbe" }}
{{- $spec := index $values $probe }}
{{- if $spec.enabled }}
{{ $probe }}:
  {{- omit $spec "enabled" | toYaml | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Extra flags after the command. Called with (dict "root" $ "component" "apiserver").
*/}}
{{- define "berth.args" -}}
{{- toJson (concat (list .component) (index .root.Values .component).extraArgs) }}
{{- end }}

{{- define "berth.sandboxNamespace" -}}
{{- .Values.sandbox.namespace | default .Release.Namespace }}
{{- end }}

{{/*
The database is configured in exactly one way. Checked in a template rather than in the
schema, so that the error names the three values instead of quoting a oneOf clause.
*/}}
{{- define "berth.databaseMode" -}}
{{- $db := .Values.postgresql }}
{{- $set := dict }}
{{- if $db.url }}{{ $_ := set $set "url" "postgresql.url" }}{{ end }}
{{- if $db.existingSecret }}{{ $_ := set $set "existingSecret" "postgresql.existingSecret" }}{{ end }}
{{- if $db.bundled.enabled }}{{ $_ := set $set "bundled" "postgresql.bundled.enabled" }}{{ end }}
{{- if ne (len $set) 1 }}
{{- $found := ternary "none is set" (printf "%d are set: %s" (len $set) (values $set | sortAlpha | join ", ")) (empty $set) }}
{{- fail (printf "Berth needs a PostgreSQL database: set exactly one of postgresql.url (a postgresql:// connection string), postgresql.existingSecret (a Secret in the release namespace holding one under postgresql.existingSecretKey) or postgresql.bundled.enabled=true (a single PostgreSQL pod, for evaluation); %s." $found) }}
{{- end }}
{{- keys $set | first }}
{{- end }}

{{/*
The stable DNS name of the bundled PostgreSQL (its headless Service).
*/}}
{{- define "berth.bundledDatabaseHost" -}}
{{- printf "%s-postgresql.%s.svc" (include "berth.fullname" .) .Release.Namespace }}
{{- end }}

{{/*
The Secret and key the processes read DATABASE_URL from.
*/}}
{{- define "berth.databaseSecretName" -}}
{{- $mode := include "berth.databaseMode" . }}
{{- if eq $mode "existingSecret" }}
{{- .Values.postgresql.existingSecret }}
{{- else if eq $mode "bundled" }}
{{- include "berth.fullname" . }}-postgresql
{{- else }}
{{- include "berth.fullname" . }}-database
{{- end }}
{{- end }}

{{- define "berth.databaseSecretKey" -}}
{{- if eq (include "berth.databaseMode" .) "existingSecret" }}
{{- .Values.postgresql.existingSecretKey }}
{{- else }}
{{- print "DATABASE_URL" }}
{{- end }}
{{- end }}

{{/*
Environment both processes share: the database, where resources and sandboxes live, and how
sandboxes are built. The API server needs the sandbox settings too: it validates agents against
them (a gpu type must be in the table) and execs into sandbox pods.
*/}}
{{- define "berth.env" -}}
{{- if and .Values.postgresql.bundled.enabled .Values.postgresql.bundled.existingSecret -}}
# The password from the Secret you manage; Kubernetes puts it into DATABASE_URL below.
- name: BERTH_DATABASE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.postgresql.bundled.existingSecret }}
      key: password
- name: DATABASE_URL
  value: {{ printf "postgresql://berth:$(BERTH_DATABASE_PASSWORD)@%s:5432/berth" (include "berth.bundledDatabaseHost" .) | quote }}
{{- else -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "berth.databaseSecretName" . }}
      key: {{ include "berth.databaseSecretKey" . }}
{{- end }}
# Berth's custom resources live in the namespace the pods run in, which the Roles cover.
- name: BERTH_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
# Names the replica in logs and, in the operator, in leader election.
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: BERTH_HOST
  value: "0.0.0.0"
- name: BERTH_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- with .Values.defaultModel }}
- name: BERTH_DEFAULT_MODEL
  value: {{ . | quote }}
{{- end }}
- name: BERTH_SECRETS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secrets.existingSecret | default (printf "%s-secrets-key" (include "berth.fullname" .)) }}
      key: BERTH_SECRETS_KEY
{{- with .Values.secrets.existingSecret }}
- name: BERTH_SECRETS_PREVIOUS_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: BERTH_SECRETS_PREVIOUS_KEYS
      optional: true
{{- end }}
- name: BERTH_CURRENCY
  value: {{ .Values.pricing.currency | quote }}
- name: BERTH_BYOI_ALLOW_HTTP
  value: {{ .Values.byoi.allowHttp | toString | quote }}
- name: BERTH_BYOI_ALLOW_PRIVATE
  value: {{ .Values.byoi.allowPrivate | toString | quote }}
- name: BERTH_WEBHOOK_ALLOW_HTTP
  value: {{ .Values.webhooks.allowHttp | toString | quote }}
- name: BERTH_WEBHOOK_ALLOW_PRIVATE
  value: {{ .Values.webhooks.allowPrivate | toString | quote }}
{{- with .Values.pricing.models }}
- name: BERTH_MODEL_PRICES
  value: {{ . | toJson | quote }}
{{- end }}
{{- with .Values.pricing.compute }}
- name: BERTH_COMPUTE_PRICES
  value: {{ . | toJson | quote }}
{{- end }}
{{- with .Values.pricing.storagePerGbHour }}
- name: BERTH_STORAGE_PRICE
  value: {{ . | quote }}
{{- end }}
- name: BERTH_SANDBOX_NAMESPACE
  value: {{ include "berth.sandboxNamespace" . | quote }}
- name: BERTH_RUNTIME_CLASS
  value: {{ .Values.sandbox.runtimeClassName | default "none" | quote }}
- name: BERTH_IMAGE_PYTHON
  value: {{ .Values.sandbox.images.python | quote }}
- name: BERTH_IMAGE_NODE
  value: {{ .Values.sandbox.images.node | quote }}
- name: BERTH_IMAGE_GO
  value: {{ .Values.sandbox.images.go | quote }}
{{- with .Values.sandbox.images.browser }}
- name: BERTH_BROWSER_IMAGE
  value: {{ . | quote }}
{{- end }}
- name: BERTH_GPU_TABLE
  value: {{ .Values.sandbox.gpuTable | toJson | quote }}
- name: BERTH_SANDBOX_CPUS
  value: {{ .Values.sandbox.resources.cpuLimit | toString | quote }}
- name: BERTH_SANDBOX_MEMORY
  value: {{ .Values.sandbox.resources.memoryLimit | quote }}
- name: BERTH_SANDBOX_CPU_REQUEST
  value: {{ .Values.sandbox.resources.cpuRequest | toString | quote }}
- name: BERTH_SANDBOX_MEMORY_REQUEST
  value: {{ .Values.sandbox.resources.memoryRequest | quote }}
- name: BERTH_WORKSPACE_SIZE
  value: {{ .Values.sandbox.workspaceSize | quote }}
- name: BERTH_EXEC_TIMEOUT
  value: {{ .Values.sandbox.execTimeout | quote }}
{{- if .Values.egressGateway.enabled }}
# Where sandbox pods find the egress gateway: the operator reads the Service's ClusterIP when it makes a pod.
- name: BERTH_EGRESS_GATEWAY
  value: {{ printf "%s-egress.%s.svc:%d" (include "berth.fullname" .) .Release.Namespace (int .Values.egressGateway.port) | quote }}
{{- end }}
{{- end }}

{{/*
Pod annotations that roll the pods when the database connection string the chart stores
changes: the processes read it once, at start.
*/}}
{{- define "berth.podChecksums" -}}
{{- if .Values.postgresql.url }}
checksum/database: {{ .Values.postgresql.url | sha256sum }}
{{- end }}
{{- end }}

{{/*
The default affinity of a component: prefer one replica per node. Called with
(dict "root" $ "component" "apiserver").
*/}}
{{- define "berth.affinity" -}}
{{- $values := index .root.Values .component }}
{{- if $values.affinity }}
{{- toYaml $values.affinity }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "berth.selectorLabels" .root | nindent 12 }}
            app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end }}

{{/*
Where the operator keeps snapshot archives (values: snapshots).
*/}}
{{- define "berth.snapshotEnv" -}}
{{- $s := .Values.snapshots -}}
- name: BERTH_SNAPSHOT_STORAGE
  value: {{ $s.storage | quote }}
{{- if eq $s.storage "directory" }}
- name: BERTH_SNAPSHOT_DIR
  value: /var/lib/berth/snapshots
{{- else }}
{{- if not $s.s3.bucket }}
{{- fail "snapshots.storage is s3: set snapshots.s3.bucket to the bucket that keeps snapshot archives" }}
{{- end }}
- name: BERTH_S3_BUCKET
  value: {{ $s.s3.bucket | quote }}
- name: BERTH_S3_PREFIX
  value: {{ $s.s3.prefix | quote }}
- name: BERTH_S3_REGION
  value: {{ $s.s3.region | quote }}
{{- with $s.s3.endpoint }}
- name: BERTH_S3_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with $s.s3.credentialsSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_ACCESS_KEY_ID
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_SECRET_ACCESS_KEY
- name: AWS_SESSION_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_SESSION_TOKEN
      optional: true
{{- end }}
{{- end }}
{{- end }}

{{/*
Sign-in to the management plane: only the API server serves /api. The client secret is read from
the Secret named in oidc.existingSecret, never from values.
*/}}
{{- define "berth.oidcEnv" -}}
- name: BERTH_SIGNUP
  value: {{ .Values.oidc.signup | quote }}
{{- with .Values.oidc.dashboardUrl }}
- name: BERTH_DASHBOARD_URL
  value: {{ . | quote }}
{{- end }}
{{- if .Values.oidc.issuer }}
{{- if not (and .Values.oidc.clientId .Values.oidc.existingSecret) }}
{{- fail "oidc.issuer is set: oidc.clientId and oidc.existingSecret (the Secret with the client secret) are needed too" }}
{{- end }}
- name: BERTH_OIDC_ISSUER
  value: {{ .Values.oidc.issuer | quote }}
- name: BERTH_OIDC_CLIENT_ID
  value: {{ .Values.oidc.clientId | quote }}
- name: BERTH_OIDC_CLIENT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.oidc.existingSecret }}
      key: {{ .Values.oidc.clientSecretKey }}
{{- end }}
{{- end }}

{{/*
A Prometheus duration (1m30s, 500ms) in milliseconds, for comparing two of them.
*/}}
{{- define "berth.milliseconds" -}}
{{- $total := 0 }}
{{- $units := dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000 }}
{{- range regexFindAll "[0-9]+(ms|h|m|s)" . -1 }}
{{- $number := regexFind "^[0-9]+" . }}
{{- $total = add $total (mul (atoi $number) (get $units (trimPrefix $number .))) }}
{{- end }}
{{- $total }}
{{- end }}
