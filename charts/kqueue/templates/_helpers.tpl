{{/* Names, labels and the pieces several templates share. */}}

{{- define "kqueue.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of namespaced resources: "kqueue" for a release called kqueue (the usual case, which
gives the same names as the controller's defaults), "<release>-kqueue" otherwise.
*/}}
{{- define "kqueue.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kqueue.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels are built as dicts and printed once, so that no object carries a key twice (a duplicate
mapping key is invalid YAML for kustomize and strict parsers). The component is a parameter:
"controller" for the controller's objects and pods, "metrics" for the metrics Service and its
ServiceMonitor.
*/}}
{{- define "kqueue.selectorLabelsFor" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "kqueue.name" $ctx | quote }}
app.kubernetes.io/instance: {{ $ctx.Release.Name | quote }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "kqueue.labelsFor" -}}
{{- $ctx := index . 0 -}}
helm.sh/chart: {{ include "kqueue.chart" $ctx }}
{{ include "kqueue.selectorLabelsFor" . }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
app.kubernetes.io/part-of: kqueue
{{- end -}}

{{/* The controller pods: what the Deployment, the Services and the PDB select. */}}
{{- define "kqueue.selectorLabels" -}}
{{ include "kqueue.selectorLabelsFor" (list . "controller") }}
{{- end -}}

{{- define "kqueue.labels" -}}
{{ include "kqueue.labelsFor" (list . "controller") }}
{{- end -}}

{{/* The metrics Service, and what the ServiceMonitor selects it by. */}}
{{- define "kqueue.metricsSelectorLabels" -}}
{{ include "kqueue.selectorLabelsFor" (list . "metrics") }}
{{- end -}}

{{- define "kqueue.metricsLabels" -}}
{{ include "kqueue.labelsFor" (list . "metrics") }}
{{- end -}}

{{/*
Pod template labels: the chart's labels and podLabels, where podLabels may replace the chart's
informational labels but never the selector labels (the Deployment would not own its pods).
*/}}
{{- define "kqueue.podLabels" -}}
{{- $selector := include "kqueue.selectorLabels" . | fromYaml -}}
{{- $all := include "kqueue.labels" . | fromYaml -}}
{{- toYaml (merge (dict) $selector (default dict .Values.podLabels) $all) -}}
{{- end -}}

{{/* ServiceMonitor labels: the chart's metrics labels and metrics.serviceMonitor.labels. */}}
{{- define "kqueue.serviceMonitorLabels" -}}
{{- $all := include "kqueue.metricsLabels" . | fromYaml -}}
{{- toYaml (merge (dict) (default dict .Values.metrics.serviceMonitor.labels) $all) -}}
{{- end -}}

{{- define "kqueue.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kqueue.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kqueue.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Development mode: webhooks point at a kqueue process outside the cluster. */}}
{{- define "kqueue.devMode" -}}
{{- if .Values.webhook.devUrl -}}true{{- end -}}
{{- end -}}

{{/* Whether kqueue generates its own webhook certificate (and injects the caBundle). */}}
{{- define "kqueue.internalCerts" -}}
{{- if and (not .Values.certManager.enabled) (not (include "kqueue.devMode" .)) -}}true{{- end -}}
{{- end -}}

{{- define "kqueue.webhookServiceName" -}}
{{- printf "%s-webhook-service" (include "kqueue.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kqueue.metricsServiceName" -}}
{{- printf "%s-metrics-service" (include "kqueue.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kqueue.webViewServiceName" -}}
{{- printf "%s-web-view" (include "kqueue.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kqueue.visibilityServiceName" -}}
{{- printf "%s-visibility" (include "kqueue.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Whether the controller's HTTPS servers check bearer tokens and access (TokenReview, SubjectAccessReview). */}}
{{- define "kqueue.delegatedAuth" -}}
{{- if or .Values.metrics.secure .Values.visibility.enabled -}}true{{- end -}}
{{- end -}}

{{- define "kqueue.webhookSecretName" -}}
{{- printf "%s-webhook-server-cert" (include "kqueue.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kqueue.certificateName" -}}
{{- printf "%s-serving-cert" (include "kqueue.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The webhook configurations are cluster-scoped and the controller injects the caBundle into them
by name, so their names are fixed (one kqueue per cluster, as the CRDs are cluster-wide too).
*/}}
{{- define "kqueue.mutatingWebhookConfigurationName" -}}kqueue-mutating-webhook-configuration{{- end -}}
{{- define "kqueue.validatingWebhookConfigurationName" -}}kqueue-validating-webhook-configuration{{- end -}}

{{/* Where the webhook server finds tls.crt/tls.key: inside the /tmp emptyDir. */}}
{{- define "kqueue.certDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end -}}

{{/*
Namespaces whose objects go through the webhooks: never kube-system (its pods must start even
when kqueue is down: kqueue could not run otherwise) nor kqueue's own namespace (kqueue's own
pods must not wait for kqueue), plus the user's extra terms.
*/}}
{{- define "kqueue.namespaceSelectorExpressions" -}}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
    - kube-system
    - {{ .Release.Namespace }}
{{- with .Values.webhook.namespaceSelectorExpressions }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The Configuration document: the user's `config` values with the release-dependent fields set
by the chart, so ports, certificate paths and names always agree with the other templates.
*/}}
{{- define "kqueue.configuration" -}}
{{- $cfg := deepCopy (default dict .Values.config) -}}
{{- $internal := eq (include "kqueue.internalCerts" .) "true" -}}
{{- $fixed := dict
  "apiVersion" "config.kqueue.io/v1alpha1"
  "kind" "Configuration"
  "namespace" .Release.Namespace
  "health" (dict "bindAddress" (printf ":%d" (int .Values.health.port)))
  "metrics" (dict "bindAddress" (printf ":%d" (int .Values.metrics.port)) "secure" .Values.metrics.secure)
  "visibility" (dict
    "bindAddress" (ternary (printf ":%d" (int .Values.visibility.port)) "0" .Values.visibility.enabled)
    "certDir" (ternary (include "kqueue.certDir" .) "" (and .Values.certManager.enabled (not (include "kqueue.devMode" .)))))
  "webView" (dict "bindAddress" (ternary (printf ":%d" (int .Values.webView.port)) "0" .Values.webView.enabled))
  "webhook" (dict "port" (int .Values.webhook.containerPort) "certDir" (include "kqueue.certDir" .))
  "internalCertManagement" (dict
    "enable" $internal
    "webhookServiceName" (include "kqueue.webhookServiceName" .)
    "webhookSecretName" (include "kqueue.webhookSecretName" .))
-}}
{{- $cfg = mergeOverwrite $cfg $fixed -}}
{{- if and .Values.webhook.namespaceSelectorExpressions (not (hasKey $cfg "managedJobsNamespaceSelector")) -}}
{{- $_ := set $cfg "managedJobsNamespaceSelector" (dict "matchExpressions" (include "kqueue.namespaceSelectorExpressions" . | fromYamlArray)) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
namespaceSelector of the Job and Pod webhooks: the Configuration's managedJobsNamespaceSelector
when the user sets one, otherwise the same default the controller uses (everything but
kube-system and the release namespace) plus webhook.namespaceSelectorExpressions. The webhooks
and the controller then agree on which namespaces are managed.
*/}}
{{- define "kqueue.jobNamespaceSelector" -}}
{{- if hasKey (default dict .Values.config) "managedJobsNamespaceSelector" -}}
{{- toYaml .Values.config.managedJobsNamespaceSelector -}}
{{- else -}}
matchExpressions:
  {{- include "kqueue.namespaceSelectorExpressions" . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
"true" when the controller runs the plain-Pod integration: `pod` in
config.integrations.frameworks, or no frameworks given (the controller's default has it). The
plain-Pod webhook and the RBAC only that integration needs follow it.
*/}}
{{- define "kqueue.plainPods" -}}
{{- $integrations := default dict (default dict .Values.config).integrations -}}
{{- if or (not (hasKey $integrations "frameworks")) (has "pod" (default list $integrations.frameworks)) -}}true{{- end -}}
{{- end -}}
