{{/*
RBAC rules, kept apart from the Role objects so that each can be placed in the release
namespace or the sandbox namespace. The resource list is Berth's CRDs in templates/crds.
*/}}

{{- define "berth.rbac.resources" -}}
- sessions
- agents
- snapshots
- schedules
- fleets
- warmpools
{{- end }}

{{- define "berth.rbac.statusResources" -}}
- sessions/status
- agents/status
- snapshots/status
- schedules/status
- fleets/status
- warmpools/status
{{- end }}

{{- define "berth.rbac.apiserverResourceRules" -}}
# Berth's resources are the desired state the API writes.
#   get, list, watch: the informer cache that answers reads;
#   create, update: new resources and spec changes; delete: terminate and remove.
- apiGroups: ["berth.dev"]
  resources:
    {{- include "berth.rbac.resources" . | nindent 4 }}
  verbs: ["get", "list", "watch", "create", "update", "delete"]
# update: the initial status written right after create, so that a new agent answers "booting".
- apiGroups: ["berth.dev"]
  resources:
    {{- include "berth.rbac.statusResources" . | nindent 4 }}
  verbs: ["update"]
{{- end }}

{{- define "berth.rbac.apiserverSandboxRules" -}}
# get: find an agent's sandbox pod before the exec route runs code in it. The API server never
# creates or deletes pods; the operator does.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
# create: the exec route (POST .../exec); get: the same call over a websocket, which starts as a GET.
- apiGroups: [""]
  resources: ["pods/exec"]
  verbs: ["create", "get"]
{{- end }}

{{- define "berth.rbac.operatorResourceRules" -}}
# Berth's resources, reconciled by the controllers.
#   get, list, watch: the informer cache the reconcilers read;
#   update: metadata and spec changes, such as adding a finalizer;
#   patch: finalizer removal by a conditional merge patch;
#   delete: resources a controller created and whose lifetime it ends (a fleet's agents).
- apiGroups: ["berth.dev"]
  resources:
    {{- include "berth.rbac.resources" . | nindent 4 }}
  verbs: ["get", "list", "watch", "update", "patch", "delete"]
# update: phase and conditions, the reconcilers' only writes to status.
- apiGroups: ["berth.dev"]
  resources:
    {{- include "berth.rbac.statusResources" . | nindent 4 }}
  verbs: ["update"]
# update: a sandbox pod's owner reference to its Agent sets blockOwnerDeletion, which the API
# server allows only to clients that may update the owner's finalizers.
- apiGroups: ["berth.dev"]
  resources:
    - agents/finalizers
    - sessions/finalizers
    - snapshots/finalizers
    - schedules/finalizers
    - fleets/finalizers
    - warmpools/finalizers
  verbs: ["update"]
# create: the Lease, by the first replica to run for leader.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
# get, update: read, take over and renew the operator's own Lease, and nobody else's.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: ["berth-operator"]
  verbs: ["get", "update"]
# create, patch: Kubernetes events on Berth's resources (patch bumps the count of a repeated one).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.egressGateway.enabled }}
# get: the egress gateway's own Service, whose ClusterIP the operator gives the pods bound to it
# as their proxy (ADR 52), so that neither it nor they need cluster DNS.
- apiGroups: [""]
  resources: ["services"]
  resourceNames: [{{ printf "%s-egress" (include "berth.fullname" .) | quote }}]
  verbs: ["get"]
{{- end }}
{{- end }}

{{- define "berth.rbac.operatorSandboxRules" -}}
# Sandbox pods, one per agent, and a warm pool's pods (ADR 53).
#   get, list, watch: find an agent's pod and follow its phase;
#   create: provision a sandbox; delete: terminate it, or replace a pod that ended;
#   patch: an agent adopts a warm pod (its labels, owner and deadline), and a restored pod is
#   released from its scheduling gate and marked restored.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
# create: run agent tool calls in the sandbox; get: the same call over a websocket, which starts as a GET.
- apiGroups: [""]
  resources: ["pods/exec"]
  verbs: ["create", "get"]
# An agent's secrets, as a Secret its pod reads (envFrom), so no value is in a pod spec:
#   create, update: when the sandbox is provisioned; delete: with its pod.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create", "update", "delete"]
{{- if .Values.egressGateway.enabled }}
# get: the egress gateway reads the CA of a pod bound to it (<agent>-egress-ca, ADR 52), which the
# operator created with the pod; every replica reads the same one.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end }}
# create: the guest programs (the launcher, ADR 47) as an immutable ConfigMap that sandbox pods
# mount, named by their hash: created once per Berth version, never changed.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
{{- end }}
