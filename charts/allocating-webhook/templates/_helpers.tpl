{{/* Resource name of every object (default allocating-webhook, the name manifests/base uses). */}}
{{- define "aw.fullname" -}}
{{- default "allocating-webhook" .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "aw.labels" -}}
app.kubernetes.io/name: {{ include "aw.fullname" . }}
app.kubernetes.io/part-of: agones-allocating-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "aw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aw.fullname" . }}
{{- end -}}

{{- define "aw.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "aw.fullname" . }}
{{- end -}}

{{- define "aw.secretName" -}}
{{- default (printf "%s-tls" (include "aw.fullname" .)) .Values.certs.secretName -}}
{{- end -}}

{{/* The DNS names kube-apiserver uses to reach the Service, plus the extra names. */}}
{{- define "aw.dnsNames" -}}
{{- $svc := include "aw.fullname" . -}}
{{- $names := list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- concat $names .Values.certs.extraDNSNames | toJson -}}
{{- end -}}

{{/*
The TLS material of mode "generate", computed once per render and kept in .Values._tls:
the Secret already in the cluster when it holds a complete pair (so `helm upgrade` keeps the CA and
the caBundle), otherwise a new CA and serving certificate.
*/}}
{{- define "aw.tls" -}}
{{- if not (hasKey .Values "_tls") -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "aw.secretName" .) -}}
{{- $data := dict -}}
{{- if and $existing $existing.data -}}
{{- $data = $existing.data -}}
{{- end -}}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") -}}
{{- $_ := set .Values "_tls" (dict "ca" (index $data "ca.crt") "crt" (index $data "tls.crt") "key" (index $data "tls.key")) -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" (include "aw.fullname" .)) (int .Values.certs.generate.caDays) -}}
{{- $dns := include "aw.dnsNames" . | fromJsonArray -}}
{{- $cert := genSignedCert (first $dns) .Values.certs.extraIPs $dns (int .Values.certs.generate.days) $ca -}}
{{- $_ := set .Values "_tls" (dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* caBundle (base64 PEM) for the webhook configurations; empty with cert-manager (cainjector). */}}
{{- define "aw.caBundle" -}}
{{- if eq .Values.certs.mode "generate" -}}
{{- include "aw.tls" . -}}
{{- .Values._tls.ca -}}
{{- else if eq .Values.certs.mode "secret" -}}
{{- required "certs.caBundle is required with certs.mode=secret" .Values.certs.caBundle -}}
{{- end -}}
{{- end -}}

{{- define "aw.validate" -}}
{{- if not (has .Values.certs.mode (list "generate" "cert-manager" "secret")) -}}
{{- fail (printf "certs.mode must be generate, cert-manager or secret, not %q" .Values.certs.mode) -}}
{{- end -}}
{{- if not (has .Values.webhooks.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "webhooks.failurePolicy must be Ignore or Fail, not %q" .Values.webhooks.failurePolicy) -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.apiServerCIDR) -}}
{{- fail "networkPolicy.apiServerCIDR is required with networkPolicy.enabled (the control plane's source range, e.g. 10.0.0.0/28)" -}}
{{- end -}}
{{- if and .Values.webhooks.url (not (hasPrefix "https://" .Values.webhooks.url)) -}}
{{- fail (printf "webhooks.url must start with https:// (kube-apiserver calls webhooks over TLS), not %q" .Values.webhooks.url) -}}
{{- end -}}
{{- end -}}

{{/* One webhook's clientConfig for PATH. */}}
{{- define "aw.clientConfig" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
clientConfig:
{{- if $root.Values.webhooks.url }}
  url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhooks.url) $path | quote }}
{{- else }}
  service:
    name: {{ include "aw.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ $path }}
    port: {{ $root.Values.service.port }}
{{- end }}
{{- with include "aw.caBundle" $root }}
  caBundle: {{ . }}
{{- end }}
{{- end -}}

{{- define "aw.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ concat (list "kube-system" .Release.Namespace) .Values.webhooks.excludeNamespaces | uniq | toJson }}
{{- end -}}

{{- define "aw.webhookCommon" -}}
failurePolicy: {{ .Values.webhooks.failurePolicy }}
matchPolicy: Equivalent
sideEffects: None
admissionReviewVersions: ["v1"]
timeoutSeconds: {{ .Values.webhooks.timeoutSeconds }}
{{- end -}}

{{- /*
The GameServer webhooks' matchConditions, as in manifests/base (charts/hack/check-render.py
compares them): a write that changes only the allocation gateway's delivery marks
(allocating.agones.dev/delivered, answer-by) is not sent to the webhook.
*/ -}}
{{- define "aw.gameServerMatchConditions" -}}
matchConditions:
  - name: not-only-delivery-marks
    expression: >-
      request.operation != 'UPDATE' || oldObject == null || object == null ||
      !(object.spec == oldObject.spec &&
      ('status' in object) == ('status' in oldObject) &&
      (!('status' in object) || object.status == oldObject.status) &&
      ('labels' in object.metadata) == ('labels' in oldObject.metadata) &&
      (!('labels' in object.metadata) || object.metadata.labels == oldObject.metadata.labels) &&
      ('deletionTimestamp' in object.metadata) == ('deletionTimestamp' in oldObject.metadata) &&
      ('finalizers' in object.metadata) == ('finalizers' in oldObject.metadata) &&
      (!('finalizers' in object.metadata) || object.metadata.finalizers == oldObject.metadata.finalizers) &&
      ('annotations' in object.metadata) && ('annotations' in oldObject.metadata) &&
      object.metadata.annotations.all(k, k in ['allocating.agones.dev/delivered', 'allocating.agones.dev/answer-by'] ||
        (k in oldObject.metadata.annotations && oldObject.metadata.annotations[k] == object.metadata.annotations[k])) &&
      oldObject.metadata.annotations.all(k, k in ['allocating.agones.dev/delivered', 'allocating.agones.dev/answer-by'] ||
        k in object.metadata.annotations))
{{- end -}}

{{- define "aw.certManagerAnnotation" -}}
{{- if eq .Values.certs.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "aw.fullname" . }}-serving
{{- end -}}
{{- end -}}

{{/* The container's arguments: the chart-managed flags, then .Values.flags, then extraArgs. */}}
{{- define "aw.args" -}}
{{- $trusted := prepend .Values.trustedUsers (include "aw.serviceAccountUser" .) | uniq -}}
{{- $controller := prepend .Values.agones.extraControllerUsers (printf "system:serviceaccount:%s:%s" .Values.agones.namespace .Values.agones.serviceAccounts.controller) | uniq -}}
- --port={{ .Values.ports.https }}
- --health-port={{ .Values.ports.health }}
- --tls-cert-file=/etc/allocating-webhook/tls/tls.crt
- --tls-key-file=/etc/allocating-webhook/tls/tls.key
- --trusted-users={{ join "," $trusted }}
- --agones-controller-users={{ join "," $controller }}
- --sdk-service-account={{ .Values.agones.serviceAccounts.sdk }}
{{- if .Values.autoscale.buffer }}
- --autoscale-buffer=true
{{- end }}
{{- range $name, $value := .Values.flags }}
{{- if has $name (list "port" "health-port" "tls-cert-file" "tls-key-file" "trusted-users" "agones-controller-users" "sdk-service-account" "autoscale-buffer") }}
{{- fail (printf "flags.%s is set by the chart (see values.yaml: ports, certs, trustedUsers, agones, autoscale)" $name) }}
{{- end }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $value = int64 $value }}
{{- end }}
- {{ printf "--%s=%v" $name $value | quote }}
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* ---- The allocation gateway (gateway.enabled) ---- */}}
{{- define "aw.gatewayName" -}}
{{- .Values.gateway.name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "aw.gatewayLabels" -}}
app.kubernetes.io/name: {{ include "aw.gatewayName" . }}
app.kubernetes.io/part-of: agones-allocating-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "aw.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ include "aw.gatewayName" . }}
{{- end -}}

{{- define "aw.gatewaySecretName" -}}
{{- default (printf "%s-tls" (include "aw.gatewayName" .)) .Values.gateway.certs.secretName -}}
{{- end -}}

{{- define "aw.gatewayDnsNames" -}}
{{- $svc := include "aw.gatewayName" . -}}
{{- $names := list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- concat $names .Values.gateway.certs.extraDNSNames | toJson -}}
{{- end -}}

{{/* The gateway's TLS material of certs.mode "generate", once per render (.Values._gwtls): the
Secret in the cluster when complete (upgrades keep it), else a new CA and serving certificate. */}}
{{- define "aw.gatewayTls" -}}
{{- if not (hasKey .Values "_gwtls") -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "aw.gatewaySecretName" .) -}}
{{- $data := dict -}}
{{- if and $existing $existing.data -}}
{{- $data = $existing.data -}}
{{- end -}}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") -}}
{{- $_ := set .Values "_gwtls" (dict "ca" (index $data "ca.crt") "crt" (index $data "tls.crt") "key" (index $data "tls.key")) -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" (include "aw.gatewayName" .)) (int .Values.certs.generate.caDays) -}}
{{- $dns := include "aw.gatewayDnsNames" . | fromJsonArray -}}
{{- $cert := genSignedCert (first $dns) .Values.gateway.certs.extraIPs $dns (int .Values.certs.generate.days) $ca -}}
{{- $_ := set .Values "_gwtls" (dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The gateway container's arguments: chart-managed flags, then .Values.gateway.flags, then extraArgs. */}}
{{- define "aw.gatewayArgs" -}}
{{- $g := .Values.gateway -}}
- --port={{ $g.ports.https }}
- --health-port={{ $g.ports.health }}
- --tls-cert-file=/etc/allocation-gateway/tls/tls.crt
- --tls-key-file=/etc/allocation-gateway/tls/tls.key
{{- if $g.disableMTLS }}
- --disable-mtls=true
{{- else }}
- --client-ca-dir=/etc/allocation-gateway/client-ca
{{- end }}
- --allocator-address={{ $g.allocator.address }}
{{- if hasPrefix "https://" $g.allocator.address }}
- --allocator-client-cert-file=/etc/allocation-gateway/allocator/tls.crt
- --allocator-client-key-file=/etc/allocation-gateway/allocator/tls.key
- --allocator-ca-file=/etc/allocation-gateway/allocator/ca.crt
{{- end }}
{{- range $name, $value := $g.flags }}
{{- if has $name (list "port" "health-port" "tls-cert-file" "tls-key-file" "client-ca-file" "client-ca-dir" "disable-mtls" "allocator-address" "allocator-client-cert-file" "allocator-client-key-file" "allocator-ca-file") }}
{{- fail (printf "gateway.flags.%s is set by the chart (see values.yaml: gateway.ports, gateway.certs, gateway.clientCASecret, gateway.disableMTLS, gateway.allocator)" $name) }}
{{- end }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $value = int64 $value }}
{{- end }}
- {{ printf "--%s=%v" $name $value | quote }}
{{- end }}
{{- end }}
{{- range $g.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{- define "aw.gatewayValidate" -}}
{{- if not (or (hasPrefix "https://" .Values.gateway.allocator.address) (hasPrefix "http://" .Values.gateway.allocator.address)) -}}
{{- fail (printf "gateway.allocator.address must start with https:// (or http:// for an agones-allocator started with --disable-tls), not %q" .Values.gateway.allocator.address) -}}
{{- end -}}
{{- if and (hasPrefix "https://" .Values.gateway.allocator.address) (not .Values.gateway.allocator.clientSecret) -}}
{{- fail "gateway.allocator.clientSecret is required: a Secret with tls.crt/tls.key (the gateway's client certificate towards agones-allocator) and ca.crt" -}}
{{- end -}}
{{- if and (not .Values.gateway.disableMTLS) (not .Values.gateway.clientCASecret) -}}
{{- fail "gateway.clientCASecret is required unless gateway.disableMTLS: a Secret with ca.crt, the matchmakers' client CA" -}}
{{- end -}}
{{- if and (eq .Values.certs.mode "secret") (not .Values.gateway.certs.secretName) -}}
{{- fail "gateway.certs.secretName is required with certs.mode=secret (the gateway's kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- end -}}

{{/* The image: repository:tag, the tag defaulting to the chart's appVersion (the VERSION file). */}}
{{- define "allocating-webhook.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* A map of labels or annotations with every value rendered as a string: a value given as a
number or a boolean (`--set podAnnotations.revision=5`) would otherwise reach the API server as one,
which refuses the object ("expected string"). */}}
{{- define "aw.stringMap" -}}
{{- range $k, $v := . }}
{{ $k | quote }}: {{ $v | toString | quote }}
{{- end }}
{{- end -}}
