{{- define "aigw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "aigw.fullname" -}}
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

{{- define "aigw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aigw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "aigw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "aigw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end -}}

{{- define "aigw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "aigw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "aigw.secretName" -}}
{{- default (include "aigw.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{/* Where aigw sends requests: the existing Service (ingress) or the app in the pod (sidecar). */}}
{{- define "aigw.upstreamUrl" -}}
{{- if eq .Values.mode "sidecar" -}}
{{- if not .Values.app.image.repository -}}
{{- fail "mode: sidecar needs app.image.repository (the app container aigw sits in front of)" -}}
{{- end -}}
{{- printf "%s://127.0.0.1:%d" .Values.upstream.scheme (int .Values.app.port) -}}
{{- else -}}
{{- if not .Values.upstream.service.name -}}
{{- fail "mode: ingress needs upstream.service.name (the existing Service aigw forwards to)" -}}
{{- end -}}
{{- $namespace := default .Release.Namespace .Values.upstream.service.namespace -}}
{{- printf "%s://%s.%s.svc:%d" .Values.upstream.scheme .Values.upstream.service.name $namespace (int .Values.upstream.service.port) -}}
{{- end -}}
{{- end -}}

{{/* The gateway config: `config` or `configFile`, with the keys the chart owns set. */}}
{{- define "aigw.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if .Values.configFile -}}
{{- $config = fromYaml .Values.configFile -}}
{{- if hasKey $config "Error" -}}
{{- fail (printf "configFile is not a YAML mapping: %s" (get $config "Error")) -}}
{{- end -}}
{{- end -}}
{{- $listen := mergeOverwrite (get $config "listen" | default dict) (dict "host" "0.0.0.0" "port" (int .Values.gateway.port)) -}}
{{- $admin := mergeOverwrite (get $config "admin" | default dict) (dict "host" "0.0.0.0" "port" (int .Values.gateway.adminPort)) -}}
{{- $shutdown := mergeOverwrite (get $config "shutdown" | default dict) (dict "grace" (int .Values.gateway.shutdownGrace)) -}}
{{- $upstreams := get $config "upstreams" | default dict -}}
{{- $upstream := mergeOverwrite (get $upstreams .Values.upstream.name | default dict) (dict "url" (include "aigw.upstreamUrl" .)) -}}
{{- if .Values.upstream.healthPath -}}
{{- $_ := set $upstream "health_path" .Values.upstream.healthPath -}}
{{- end -}}
{{- $_ := set $upstreams .Values.upstream.name $upstream -}}
{{- $_ := set $config "listen" $listen -}}
{{- $_ := set $config "admin" $admin -}}
{{- $_ := set $config "shutdown" $shutdown -}}
{{- $_ := set $config "upstreams" $upstreams -}}
{{- if not (hasKey $config "default_upstream") -}}
{{- $_ := set $config "default_upstream" .Values.upstream.name -}}
{{- end -}}
{{- if .Values.policies -}}
{{- $_ := set $config "policies" "policies" -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* More than one pod counting rate limits in memory: each would count alone. */}}
{{- define "aigw.checkRateLimitStore" -}}
{{- $config := include "aigw.config" . | fromYaml -}}
{{- $limits := get $config "rate_limits" -}}
{{- $replicas := int (include "aigw.maxReplicas" .) -}}
{{- if and $limits (gt $replicas 1) (not .Values.allowMemoryRateLimitsWithReplicas) -}}
{{- $storage := get $limits "storage" | default "memory://" -}}
{{- if hasPrefix "memory:" $storage -}}
{{- fail (printf "rate_limits.storage is %s with up to %d replicas: each pod would count alone, so clients would get the limit once per pod. Set rate_limits.storage to a Redis URL (e.g. ${REDIS_URL} from secrets), or allowMemoryRateLimitsWithReplicas: true to accept per-pod counts." $storage $replicas) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Most pods this release can run at once: replicaCount, or the autoscaler's maximum. */}}
{{- define "aigw.maxReplicas" -}}
{{- if .Values.autoscaling.enabled -}}
{{- int .Values.autoscaling.maxReplicas -}}
{{- else -}}
{{- int .Values.replicaCount -}}
{{- end -}}
{{- end -}}

{{/* More than one pod with state that must be shared kept in one pod: AIDIP registrations in
memory (each pod lists only its own), AIP nonces in memory (a replay to another pod passes), AIP
events in a file (scattered over pod filesystems, lost with a pod), AIP issued request ids and
event ids in memory (aip.event.store, else the signing nonce store). */}}
{{- define "aigw.checkLocalStores" -}}
{{- $config := include "aigw.config" . | fromYaml -}}
{{- $replicas := int (include "aigw.maxReplicas" .) -}}
{{- if and (gt $replicas 1) (not .Values.allowLocalStoresWithReplicas) -}}
{{- $local := list -}}
{{- $aidip := get $config "aidip" -}}
{{- if and $aidip (ne (toString (get $aidip "enabled")) "false") -}}
{{- if not (get (get $aidip "registry" | default dict) "redis_url") -}}
{{- $local = append $local "aidip.registry.redis_url is unset (registrations in memory)" -}}
{{- end -}}
{{- end -}}
{{- $aip := get $config "aip" -}}
{{- if and $aip (ne (toString (get $aip "enabled")) "false") -}}
{{- $signing := get $aip "signing" | default dict -}}
{{- if and (eq (toString (get $signing "enabled")) "true") (hasPrefix "memory:" (get $signing "nonce_store" | default "memory://")) -}}
{{- $local = append $local "aip.signing.nonce_store is memory:// (a replay to another pod passes)" -}}
{{- end -}}
{{- $events := get $aip "events" -}}
{{- if and $events (not (get $events "redis_url")) -}}
{{- $local = append $local "aip.events has no redis_url (events in each pod's file)" -}}
{{- end -}}
{{- $event := get $aip "event" -}}
{{- if and $event $events -}}
{{- $ledger := "memory://" -}}
{{- if eq (toString (get $signing "enabled")) "true" -}}
{{- $ledger = get $signing "nonce_store" | default "memory://" -}}
{{- end -}}
{{- $ledger = get $event "store" | default $ledger -}}
{{- if hasPrefix "memory:" $ledger -}}
{{- $local = append $local "aip.event.store is memory:// (an event citing a request another pod answered is refused)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $local -}}
{{- fail (printf "up to %d replicas, but state they must share stays in one pod: %s. Set these to a Redis URL (e.g. ${REDIS_URL} from secrets), or allowLocalStoresWithReplicas: true to accept per-pod stores." $replicas (join "; " $local)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* terminationGracePeriodSeconds: the preStop sleep, then the drain, then 10 s to close. */}}
{{- define "aigw.terminationGrace" -}}
{{- add (int .Values.gateway.preStopSleep) (int .Values.gateway.shutdownGrace) 10 -}}
{{- end -}}
