#!/bin/sh
# The unprivileged user sandboxes run as: sandbox, uid and gid 1000 (the operator's
# SANDBOX_UID), home /home/sandbox, and /workspace, the agents' working directory, owned by
# it. Runs inside the image being built, like install-packages.sh.
set -eu
groupadd --gid 1000 sandbox
useradd --uid 1000 --gid 1000 --home-dir /home/sandbox --create-home --shell /bin/bash sandbox
mkdir -p /workspace
chown sandbox:sandbox /workspace
