{{/* Labels every object of the module carries. */}}
{{- define "serverless.labels" -}}
app.kubernetes.io/name: serverless
app.kubernetes.io/part-of: serverless
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
kyma-project.io/module: serverless
{{- end }}

{{/* Full image reference of global.images.<key>; in FIPS mode its FIPS
image where it has one (1.13's runtimes), unless `image` overrides it. */}}
{{- define "serverless.image" -}}
{{- $img := index .root.Values.global.images .key -}}
{{- if $img.image -}}
{{- $img.image -}}
{{- else if and .root.Values.containers.manager.fipsModeEnabled $img.fipsRepository -}}
{{- printf "%s/%s:%s" ($img.fipsRegistry | default ($img.registry | default .root.Values.global.imageRegistry)) $img.fipsRepository ($img.tag | toString) -}}
{{- else -}}
{{- printf "%s/%s:%s" ($img.registry | default .root.Values.global.imageRegistry) $img.repository ($img.tag | toString) -}}
{{- end -}}
{{- end }}

{{/* The registry the internal registry's Service serves, as pushed to from Pods. */}}
{{- define "serverless.pushAddress" -}}
{{- printf "serverless-docker-registry.%s.svc.cluster.local:%v" .Release.Namespace .Values.global.registryServicePort -}}
{{- end }}

{{/* The address nodes pull internal images from. */}}
{{- define "serverless.pullAddress" -}}
{{- printf "localhost:%v" .Values.global.registryNodePort -}}
{{- end }}

{{/* Registry credentials: values, else the existing Secret, else random (plain `helm install`). */}}
{{- define "serverless.registryCredentials" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace "serverless-registry-config-default" -}}
{{- $data := dict -}}
{{- if $existing }}{{ $data = $existing.data | default dict }}{{ end -}}
{{- $user := .Values.dockerRegistry.username | default (get $data "username" | b64dec) | default (randAlphaNum 20) -}}
{{- $pass := .Values.dockerRegistry.password | default (get $data "password" | b64dec) | default (randAlphaNum 40) -}}
{{- dict "username" $user "password" $pass | toJson -}}
{{- end }}

{{/* Pod security context of the restricted Pod Security level. */}}
{{- define "serverless.restrictedPod" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container security context of the restricted Pod Security level. */}}
{{- define "serverless.restrictedContainer" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{- /* The controller's APP_FUNCTION_RESOURCE_CONFIG: in buildless mode the
Function presets are buildlessFunctionPresets. */ -}}
{{- define "serverless.resourceConfig" -}}
{{- $rc := deepCopy .Values.controller.resourcesConfiguration }}
{{- if eq .Values.functionMode "buildless" }}
{{- $_ := set $rc.function.resources "presets" .Values.controller.buildlessFunctionPresets }}
{{- end }}
{{- toYaml $rc }}
{{- end }}

{{- /* The env of a module binary's container in FIPS mode
(docs/contributor/fips.md): the switch its main checks and Go's
enforcement, without which it refuses to start. */ -}}
{{- define "serverless.fipsEnv" -}}
- name: KYMA_FIPS_MODE_ENABLED
  value: "true"
- name: GODEBUG
  value: fips140=only
{{- end }}
