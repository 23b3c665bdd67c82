#!/usr/bin/env bash
# kubelet for the e2e suite and the kubelet bench, in
# ${CRIDOCK_TOOLS_DIR:-/var/cache/cridock-tools}/bin/kubelet. It is built with
# the rest of Kubernetes in one `go build` (scripts/env/install-kubernetes.sh),
# so that kubeadm, the control plane and kubelet share compiled packages.
exec bash "$(dirname "${BASH_SOURCE[0]}")/install-kubernetes.sh" "$@"
