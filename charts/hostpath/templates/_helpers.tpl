{{/*
hostpath.image: the image of one program, from the dict {root, name}:
COMPONENT.image.repository (or image.registry/NAME), then @digest if set,
else :tag (COMPONENT.image.tag, image.tag, the chart's appVersion).
*/}}
{{- define "hostpath.image" -}}
{{- $c := index .root.Values .name -}}
{{- $repo := $c.image.repository | default (printf "%s/%s" (trimSuffix "/" .root.Values.image.registry) .name) -}}
{{- if $c.image.digest -}}
{{ $repo }}@{{ $c.image.digest }}
{{- else -}}
{{ $repo }}:{{ $c.image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
hostpath.args: the arguments every program ends with, from {root, name}:
--v=LOGLEVEL, then what the chart adds for the component (.more), then
COMPONENT.extraArgs.
*/}}
{{- define "hostpath.args" -}}
{{- $c := index .root.Values .name -}}
- --v={{ $c.logLevel }}
{{- range .more }}
- {{ . }}
{{- end }}
{{- range $c.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
hostpath.placement: the pod spec's placement fields from {root, name,
tolerations}: imagePullSecrets, priorityClassName, nodeSelector, affinity,
and tolerations (the given ones, then COMPONENT.tolerations), always present
so that the objects equal the kustomize base's.
*/}}
{{- define "hostpath.placement" -}}
{{- $c := index .root.Values .name -}}
{{- with .root.Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- $tolerations := concat (.tolerations | default list) ($c.tolerations | default list) }}
{{- if $tolerations }}
tolerations:
{{- toYaml $tolerations | nindent 0 }}
{{- else }}
tolerations: []
{{- end }}
{{- end -}}

{{/*
hostpath.nodeAgentTolerations: what the manager and the provisioner
tolerate besides their own values: the control-plane taint with
controlPlane=true.
*/}}
{{- define "hostpath.nodeAgentTolerations" -}}
{{- if .Values.controlPlane -}}
- {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
{{- end -}}
{{- end -}}

{{/*
hostpath.namespace: the chart installs into hostpath-system only: the
admission policies and the SecurityContextConstraints name its service
accounts by that namespace.
*/}}
{{- define "hostpath.namespace" -}}
{{- if ne .Release.Namespace "hostpath-system" -}}
{{- fail (printf "hostpath installs into the namespace hostpath-system only (the admission policies name its service accounts), not %q: helm install ... --namespace hostpath-system --create-namespace" .Release.Namespace) -}}
{{- end -}}
hostpath-system
{{- end -}}
