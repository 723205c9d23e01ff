{{/* Names, labels and the environment shared by every Engram pod. */}}

{{- define "engram.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "engram.fullname" -}}
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

{{/* ENGRAM_PUBLIC_URL: config.publicUrl, else the first ingress host, else the Service. */}}
{{- define "engram.publicUrl" -}}
{{- if .Values.config.publicUrl -}}
{{- .Values.config.publicUrl -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- printf "https://%s" (first .Values.ingress.hosts).host -}}
{{- else -}}
{{- printf "http://%s" (include "engram.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The other Host names /mcp answers to: every ingress host and the Service's names. */}}
{{- define "engram.mcpAllowedHosts" -}}
{{- $service := include "engram.fullname" . -}}
{{- $hosts := list $service (printf "%s.%s" $service .Release.Namespace) (printf "%s.%s.svc" $service .Release.Namespace) (printf "%s.%s.svc.cluster.local" $service .Release.Namespace) -}}
{{- if .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}
{{- $hosts = append $hosts .host -}}
{{- end -}}
{{- end -}}
{{- join "," $hosts -}}
{{- end -}}

{{- define "engram.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "engram.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "engram.selectorLabels" -}}
app.kubernetes.io/name: {{ include "engram.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "engram.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "engram.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "engram.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "engram.secretName" -}}
{{- default (include "engram.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "engram.qdrantUrl" -}}
{{- if .Values.qdrant.enabled -}}
{{- printf "http://%s-qdrant:6334" .Release.Name -}}
{{- else -}}
{{- required "qdrant.external.url is required when qdrant.enabled is false" .Values.qdrant.external.url -}}
{{- end -}}
{{- end -}}

{{/* Configuration (ConfigMap) and secrets (Secret) of every role, as environment variables. */}}
{{- define "engram.envFrom" -}}
- configMapRef:
    name: {{ include "engram.fullname" . }}
- secretRef:
    name: {{ include "engram.secretName" . }}
{{- end -}}

{{/* The ReadWriteMany claim holding the audit anchor and the erasure ledger. */}}
{{- define "engram.sharedStateClaim" -}}
{{- default (printf "%s-shared-state" (include "engram.fullname" .)) .Values.sharedState.existingClaim -}}
{{- end -}}
