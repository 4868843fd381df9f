#!/usr/bin/env bash
# Applies examples/local/cluster.yaml to the API server in $KUBECONFIG and does
# what the rest of Cluster API would: the infrastructure provider marks the
# Cluster provisioned, the Machine controller makes the Machine own its
# KubeadmConfig. The KubeadmConfig controller then writes the data secret,
# which this script prints.
#
#   KUBECONFIG=<path printed by make run> examples/local/bootstrap.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kubectl=${KUBECTL:-$("${here}/../../hack/tools.sh" path kubectl)}
[[ -x "${kubectl}" ]] || kubectl=kubectl

"${kubectl}" apply -f "${here}/cluster.yaml"
"${kubectl}" patch cluster demo --subresource=status --type=merge \
  -p '{"status":{"initialization":{"infrastructureProvisioned":true}}}'
uid=$("${kubectl}" get machine demo-cp-0 -o jsonpath='{.metadata.uid}')
"${kubectl}" patch kubeadmconfig demo-cp-0 --type=merge -p "{\"metadata\":{\"ownerReferences\":[{
  \"apiVersion\":\"cluster.x-k8s.io/v1beta2\",\"kind\":\"Machine\",\"name\":\"demo-cp-0\",\"uid\":\"${uid}\",\"controller\":true}]}}"

"${kubectl}" wait kubeadmconfig demo-cp-0 --for=jsonpath='{.status.initialization.dataSecretCreated}'=true --timeout=60s
"${kubectl}" get kubeadmconfig demo-cp-0 -o wide
value=$("${kubectl}" get secret demo-cp-0 -o jsonpath='{.data.value}' | base64 -d)
echo "--- data secret demo-cp-0: format $("${kubectl}" get secret demo-cp-0 -o jsonpath='{.data.format}' | base64 -d)"
printf '%s\n' "${value}" | sed -n '1,3p'
echo "--- files it writes:"
printf '%s\n' "${value}" | sed -n 's/^ *- path: /  /p'
