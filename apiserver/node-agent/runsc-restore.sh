#!/bin/bash
# runsc, as the binary that gVisor's containerd shim runs (its runsc.toml `binary_name`): every
# call goes to the real runsc unchanged, except `start` of a container whose pod has a checkpoint
# staged by Berth's node agent (`berth node`). That start becomes `runsc restore` of the staged
# image: the pod's sandbox (its pause container) first, then its sandbox container, after which
# gVisor restores the processes and memory of the checkpointed pod into the new one.
#
# A staged checkpoint is a directory named after the new pod's UID, so only the pod it was
# staged for can take it: <restores>/<pod uid>/{image/,workspace/,ready}.
#   BERTH_RUNSC_BINARY  the real runsc (default /usr/local/bin/runsc)
#   BERTH_NODE_RESTORES where staged checkpoints are (default: ../restores beside this file's bin/)
set -euo pipefail

real=${BERTH_RUNSC_BINARY:-/usr/local/bin/runsc}
restores=${BERTH_NODE_RESTORES:-$(dirname "$(dirname "$(readlink -f "$0")")")/restores}

args=("$@")
i=0
while [ "$i" -lt "${#args[@]}" ] && [[ ${args[$i]} == -* ]]; do i=$((i + 1)); done
command=${args[$i]:-}
if { [ "$command" != create ] && [ "$command" != start ]; } || [ ! -d "$restores" ]; then exec "$real" "$@"; fi
globals=("${args[@]:0:$i}")
id=${args[${#args[@]} - 1]}

# gVisor refuses a restore whose spec differs in a dev.gvisor.* annotation, and its shim writes the
# pod's cgroup parent, which names the pod's UID, into one: a new pod always differs there. So a
# pod being restored is created with validation that only warns (the sandbox keeps the flags it
# was created with); the node agent checks what matters before staging (same image, same runsc,
# the pod made by the same builder), and runsc itself refuses a checkpoint of another version.
if [ "$command" = create ]; then
  bundle=.
  for ((j = i + 1; j < ${#args[@]}; j++)); do
    case ${args[$j]} in
      --bundle=*) bundle=${args[$j]#--bundle=} ;;
      --bundle | -bundle | -b) bundle=${args[$((j + 1))]} ;;
    esac
  done
  uid=$(grep -o '"io.kubernetes.cri.sandbox-uid":"[^"]*"' "$bundle/config.json" | head -n 1 | cut -d'"' -f4 || true)
  if [ -n "$uid" ] && [ -f "$restores/$uid/ready" ]; then
    exec "$real" "${globals[@]}" --restore-spec-validation=warning "${args[@]:$i}"
  fi
  exec "$real" "$@"
fi

state=$("$real" "${globals[@]}" state "$id")
# runsc state prints the OCI state with the spec's annotations, one "key": "value" a line.
annotation() { sed -n "s/^ *\"$1\": \"\\([^\"]*\\)\",\\{0,1\\}\$/\\1/p" <<<"$state" | head -n 1; }
uid=$(annotation 'io\.kubernetes\.cri\.sandbox-uid')
staged="$restores/$uid"
if [ -z "$uid" ] || [ ! -f "$staged/ready" ]; then exec "$real" "$@"; fi

if [ "$(annotation 'io\.kubernetes\.cri\.container-type')" = container ]; then
  # The workspace volume is a host directory the sandbox reads through its gofer: its files go
  # back before the restore, which reopens what the checkpointed processes had open there.
  # containerd writes config.json as Go marshals an OCI mount: destination, type, source.
  bundle=$(sed -n 's/^ *"bundle": "\([^"]*\)",\{0,1\}$/\1/p' <<<"$state" | head -n 1)
  source=$(grep -o '"destination":"/workspace","type":"[^"]*","source":"[^"]*"' "$bundle/config.json" | sed 's/.*"source":"\([^"]*\)"$/\1/' || true)
  if [ -d "$staged/workspace" ] && [ -n "$source" ]; then cp -a "$staged/workspace/." "$source/"; fi
fi
exec "$real" "${globals[@]}" restore --detach "--image-path=$staged/image" "$id"
