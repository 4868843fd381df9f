#!/usr/bin/env bash
# Builds the tool binaries this project needs from the Go module proxy into a
# versioned cache outside the clone, so CI and later sessions reuse them.
#
#   hack/tools.sh [all|e2e|envtest|kubeadm|kubeadm-matrix|upgrade-from|oldest-newest|node-release-<version>|kubectl|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|coredns|node-packages|node-images|cert-manager|upstream-releases|clusterctl|controller-gen|golangci-lint|ginkgo|ignition|ignition-validate|benchstat|cloud-init|podman]...
#   hack/tools.sh path <tool>     # print where a tool lives (no build)
#
# Layout: $CABPK_TOOLS_CACHE/<tool>/<version>/<tool>; envtest's assets directory
# (kube-apiserver + etcd side by side) is $CABPK_TOOLS_CACHE/envtest/<k8s>-<build>-<etcd>/.
# internal/testbin computes the same paths; keep the two in step.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../internal/testbin/versions.env
source "${repo_root}/internal/testbin/versions.env"

TOOLS_CACHE=${CABPK_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/cabpk-formats/tools}
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local

# Each line says how long this run has taken so far, so a cold run's log shows
# where its time goes.
log() { printf '[tools %4ds] %s\n' "${SECONDS}" "$*" >&2; }

# major v1.36.3 -> 1; minor v1.36.3 -> 36.
major() { local v=${1#v}; echo "${v%%.*}"; }
minor() { local v=${1#v}; v=${v#*.}; echo "${v%%.*}"; }

# The ginkgo CLI runs suites written with the ginkgo library and must be of
# the library's version, so the test module's go.mod pins both.
ginkgo_version() {
  (cd "${repo_root}/test" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
}

tool_path() {
  case "$1" in
    envtest) echo "${TOOLS_CACHE}/envtest/${KUBERNETES_VERSION}-${KUBERNETES_TOOLS_BUILD}-${ETCD_VERSION}" ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubeadm | kubectl | kubelet | kube-proxy) echo "${TOOLS_CACHE}/$1/${KUBERNETES_VERSION}-${KUBERNETES_TOOLS_BUILD}/$1" ;;
    coredns) echo "${TOOLS_CACHE}/coredns/${COREDNS_VERSION}-${COREDNS_BUILD}/coredns" ;;
    node-images) echo "${TOOLS_CACHE}/node-images/${KUBERNETES_VERSION}-${KUBERNETES_TOOLS_BUILD}-etcd${ETCD_VERSION}-coredns${COREDNS_VERSION}-r${NODE_IMAGES_REVISION}" ;;
    cert-manager) echo "${TOOLS_CACHE}/cert-manager/${CERT_MANAGER_VERSION}-${CERT_MANAGER_BUILD}" ;;
    upstream-releases) echo "${TOOLS_CACHE}/upstream-releases/capi${CLUSTER_API_VERSION}-certmanager${CERT_MANAGER_VERSION}-${CERT_MANAGER_BUILD}-r${UPSTREAM_RELEASES_REVISION}" ;;
    etcd) echo "${TOOLS_CACHE}/etcd/${ETCD_VERSION}/etcd" ;;
    controller-gen) echo "${TOOLS_CACHE}/controller-gen/${CONTROLLER_GEN_VERSION}/controller-gen" ;;
    clusterctl) echo "${TOOLS_CACHE}/clusterctl/${CLUSTER_API_VERSION}/clusterctl" ;;
    ignition-validate) echo "${TOOLS_CACHE}/ignition-validate/${IGNITION_VERSION}/ignition-validate" ;;
    ignition) echo "${TOOLS_CACHE}/ignition/${IGNITION_VERSION}/ignition" ;;
    benchstat) echo "${TOOLS_CACHE}/benchstat/${BENCHSTAT_VERSION}/benchstat" ;;
    golangci-lint) echo "${TOOLS_CACHE}/golangci-lint/${GOLANGCI_LINT_VERSION}/golangci-lint" ;;
    ginkgo) echo "${TOOLS_CACHE}/ginkgo/$(ginkgo_version)/ginkgo" ;;
    cloud-init | podman) command -v "$1" || echo "/usr/bin/$1" ;;
    *) log "unknown tool $1"; return 1 ;;
  esac
}

# build_in_wrapper <out> <go.mod body> <package> [ldflags]: builds a package
# inside a throwaway module so that the tool's dependencies never touch this
# repo's go.mod.
build_in_wrapper() {
  local out=$1 gomod=$2 pkg=$3 ldflags=${4:-}
  build_wrapper "${out}" "${gomod}" "$(printf 'package tools\n\nimport _ "%s"\n' "${pkg}")" tools.go "${ldflags}" "${pkg}"
}

# build_wrapper <out> <go.mod body> <Go source> <its file name> <ldflags> <package...>:
# the throwaway module holds the one source file. An <out> ending in / is a
# directory that receives one binary per package.
build_wrapper() {
  local out=$1 gomod=$2 src=$3 file=$4 ldflags=$5 cgo=${CGO:-0} dir tmp
  shift 5
  dir=$(mktemp -d)
  printf '%s\n' "${gomod}" >"${dir}/go.mod"
  printf '%s' "${src}" >"${dir}/${file}"
  (cd "${dir}" && go mod tidy >/dev/null 2>&1 || true)
  tmp="${out%/}.tmp"
  mkdir -p "$(dirname "${tmp}")"
  [[ "${out}" == */ ]] && mkdir -p "${tmp}" && tmp="${tmp}/"
  if ! (cd "${dir}" && CGO_ENABLED=${cgo} go build -trimpath -ldflags "${ldflags}" -o "${tmp}" "$@"); then
    rm -rf "${dir}" "${tmp}"
    return 1
  fi
  rm -rf "${dir}"
  [[ "${out}" == */ ]] || mv "${tmp}" "${out}"
}

# Kubernetes' go.mod replaces its staging modules with local paths; a wrapper
# module that pins each of them to the matching published k8s.io release builds
# the real commands unchanged.
kubernetes_gomod() {
  local modfile staging_version replaces
  modfile=$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  staging_version="v0${KUBERNETES_VERSION#v1}"
  replaces=$(sed -n "s#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 ${staging_version}#p" "${modfile}")
  printf 'module cabpk-formats.local/k8s-tools\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n%s\n)\n' \
    "${KUBERNETES_VERSION}" "${replaces}"
}

# build_kubernetes_cmds <name>...: builds the missing ones in one go build, so
# that Kubernetes' module graph is loaded once and the links run side by side.
build_kubernetes_cmds() {
  local name missing=() pkgs=() staging
  for name in "$@"; do
    [[ -x "$(tool_path "${name}")" ]] || missing+=("${name}")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  log "building ${missing[*]} ${KUBERNETES_VERSION} (several minutes on a cold cache)"
  for name in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${name}"); done
  staging="${TOOLS_CACHE}/.kubernetes-build-$$"
  local imports
  imports=$(printf '\t_ "%s"\n' "${pkgs[@]}")
  build_wrapper "${staging}/" "$(kubernetes_gomod)" "$(printf 'package tools\n\nimport (\n%s\n)\n' "${imports}")" tools.go \
    "$(kubernetes_version_ldflags)" "${pkgs[@]}" || return 1
  for name in "${missing[@]}"; do
    mkdir -p "$(dirname "$(tool_path "${name}")")"
    mv "${staging}.tmp/${name}" "$(tool_path "${name}")"
  done
  rm -rf "${staging}.tmp"
}

# The version matrix's kubeadm, one per supported minor, each where
# tool_path puts kubeadm for that KUBERNETES_VERSION.
build_kubeadm_matrix() {
  local v
  for v in ${KUBERNETES_MATRIX_VERSIONS//,/ }; do
    (KUBERNETES_VERSION=${v} build_kubernetes_cmds kubeadm) || return 1
  done
}

# The version stamp Kubernetes' own build (hack/lib/version.sh) puts in its
# binaries, so that kubectl, clusterctl and kubeadm see a real server version.
kubernetes_version_ldflags() {
  local pkg flags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${KUBERNETES_VERSION} -X ${pkg}.gitMajor=$(major "${KUBERNETES_VERSION}")"
    flags+=" -X ${pkg}.gitMinor=$(minor "${KUBERNETES_VERSION}") -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  echo "${flags}"
}

build_etcd() {
  local out
  out=$(tool_path etcd)
  [[ -x "${out}" ]] && return 0
  log "building etcd ${ETCD_VERSION}"
  build_in_wrapper "${out}" "$(printf 'module cabpk-formats.local/etcd\n\ngo 1.26\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 %s\n\tgo.etcd.io/etcd/api/v3 %s\n\tgo.etcd.io/etcd/client/pkg/v3 %s\n\tgo.etcd.io/etcd/client/v3 %s\n\tgo.etcd.io/etcd/pkg/v3 %s\n)\n' \
    "${ETCD_VERSION}" "${ETCD_VERSION}" "${ETCD_VERSION}" "${ETCD_VERSION}" "${ETCD_VERSION}")" go.etcd.io/etcd/server/v3
}

# Ignition's own binary, for the e2e machines that run its files stage. It
# links libblkid (cgo); SELinux relabelling is off because the simulated
# machines have no SELinux policy.
build_ignition() {
  local out
  out=$(tool_path ignition)
  [[ -x "${out}" ]] && return 0
  apt_install_package libblkid-dev "Ignition links libblkid" /usr/include/blkid/blkid.h
  log "building ignition ${IGNITION_VERSION}"
  CGO=1 build_in_wrapper "${out}" "$(printf 'module cabpk-formats.local/ignition\n\ngo 1.26\n\nrequire github.com/coreos/ignition/v2 %s\n' "${IGNITION_VERSION}")" \
    github.com/coreos/ignition/v2/internal "-X github.com/coreos/ignition/v2/internal/distro.selinuxRelabel=false -X github.com/coreos/ignition/v2/internal/version.Raw=${IGNITION_VERSION}"
}

# module_dir <module> <version> <package>: the first of this repository's Go
# modules (the product's, then test/ and hack/) whose go.mod has the module at
# exactly that version and resolves every import of the package. A tool from
# such a module is built there (build_here), compiled as make test compiles
# that module (static, -trimpath), so vet and the tests reuse its packages.
GO_MODULE_DIRS=(. test hack)
module_dir() {
  local d
  for d in "${GO_MODULE_DIRS[@]}"; do
    if [[ "$(cd "${repo_root}/${d}" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' "$1" 2>/dev/null)" == "$2" ]] &&
      (cd "${repo_root}/${d}" && GOFLAGS=-mod=readonly go list -deps "$3" >/dev/null 2>&1); then
      echo "${repo_root}/${d}"
      return 0
    fi
  done
  return 1
}

# build_here <module dir> <out> <package> [ldflags]
build_here() {
  local dir=$1 out=$2 pkg=$3 ldflags=${4:-}
  mkdir -p "$(dirname "${out}")"
  (cd "${dir}" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}.tmp" "${pkg}") || { rm -f "${out}.tmp"; return 1; }
  mv "${out}.tmp" "${out}"
}

# clusterctl from the Cluster API release go.mod pins, with its version stamped
# so that it knows which contract it speaks.
build_clusterctl() {
  local out ldflags dir
  out=$(tool_path clusterctl)
  [[ -x "${out}" ]] && return 0
  log "building clusterctl ${CLUSTER_API_VERSION}"
  ldflags="-X sigs.k8s.io/cluster-api/version.gitVersion=${CLUSTER_API_VERSION} -X sigs.k8s.io/cluster-api/version.gitMajor=$(major "${CLUSTER_API_VERSION}") -X sigs.k8s.io/cluster-api/version.gitMinor=$(minor "${CLUSTER_API_VERSION}") -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
  if dir=$(module_dir sigs.k8s.io/cluster-api "${CLUSTER_API_VERSION}" sigs.k8s.io/cluster-api/cmd/clusterctl); then
    build_here "${dir}" "${out}" sigs.k8s.io/cluster-api/cmd/clusterctl "${ldflags}"
    return
  fi
  # Cluster API's go.mod replaces its api module with a local path; pin the release instead.
  build_in_wrapper "${out}" "$(printf 'module cabpk-formats.local/clusterctl\n\ngo 1.26\n\nrequire (\n\tsigs.k8s.io/cluster-api %s\n\tsigs.k8s.io/cluster-api/api %s\n)\n\nreplace sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api %s\n' "${CLUSTER_API_VERSION}" "${CLUSTER_API_VERSION}" "${CLUSTER_API_VERSION}")" \
    sigs.k8s.io/cluster-api/cmd/clusterctl "${ldflags}"
}

# CoreDNS for the e2e nodes' coredns image, with the plugins kubeadm's Corefile
# names (cmd/kubeadm/app/phases/addons/dns) and log, the way CoreDNS documents
# building it with a chosen plugin set: its full build links every cloud DNS
# back end and tracer, minutes of a cold build for code no node runs.
COREDNS_PLUGINS=(errors health ready kubernetes metrics forward cache loop reload loadbalance log)
build_coredns() {
  local out main plugin
  out=$(tool_path coredns)
  [[ -x "${out}" ]] && return 0
  log "building coredns ${COREDNS_VERSION} (plugins: ${COREDNS_PLUGINS[*]})"
  main=$'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n'
  for plugin in "${COREDNS_PLUGINS[@]}"; do
    main+=$'\t_ "github.com/coredns/coredns/plugin/'"${plugin}"$'"\n'
  done
  main+=$')\n\nfunc main() { coremain.Run() }\n'
  build_wrapper "${out}" "$(printf 'module cabpk-formats.local/coredns\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n' "${COREDNS_VERSION}")" \
    "${main}" main.go "-X github.com/coredns/coredns/coremain.GitCommit=${COREDNS_VERSION}" .
}

# What makes an e2e host a node, from Debian's packages: the container
# runtime, the CNI plugins, iptables (kube-proxy's image carries it too), and
# the static busybox the tests' pods run.
install_node_packages() {
  apt_install_package containerd "the e2e nodes' container runtime" /usr/bin/containerd
  apt_install_package runc "containerd's OCI runtime" /usr/sbin/runc
  apt_install_package containernetworking-plugins "the e2e nodes' bridge and host-local CNI plugins" /usr/lib/cni/bridge
  apt_install_package iptables "kube-proxy's rules" /usr/sbin/xtables-nft-multi
  apt_install_package conntrack "what kubeadm's preflight checks before v1.32 look for" /usr/sbin/conntrack
  apt_install_package busybox-static "the e2e test pods' image" /bin/busybox
  apt_install_package curl "the HTTP client Cluster API's KCP remediation template runs on nodes" /usr/bin/curl
  apt_install_package jq "the JSON filter that template runs on nodes" /usr/bin/jq
}

# The e2e nodes' images, tagged as kubeadm asks for them (test/tools/nodeimages).
build_node_images() {
  for t in kubeadm envtest kube-controller-manager kube-scheduler kube-proxy coredns node-packages; do build "${t}"; done
  [[ -f "$(tool_path node-images)/images.json" ]] && return 0
  log "building the e2e nodes' images (test/tools/nodeimages)"
  (cd "${repo_root}/test" && go run ./tools/nodeimages --kubernetes-version "${KUBERNETES_VERSION}" --out "$(tool_path node-images)")
}

# build_node_release <version>: a release of NODE_RELEASES, its node
# commands, etcd, CoreDNS and node images, each cached by its own version as
# the default release's are (internal/testbin's NodeReleases finds them).
build_node_release() {
  local entry etcd="" coredns=""
  for entry in ${NODE_RELEASES//,/ }; do
    if [[ "${entry%%/*}" == "$1" ]]; then
      IFS=/ read -r _ etcd coredns <<<"${entry}"
    fi
  done
  if [[ -z "${etcd}" || -z "${coredns}" ]]; then
    log "no node release $1 in versions.env's NODE_RELEASES"
    return 1
  fi
  (
    KUBERNETES_VERSION=$1 ETCD_VERSION=${etcd} COREDNS_VERSION=${coredns}
    build_kubernetes_cmds "${KUBERNETES_CMDS[@]}"
    build_node_images
  )
}

# The oldest and the newest supported minor's releases: the matrix's ends.
build_oldest_newest() {
  local versions
  IFS=, read -r -a versions <<<"${KUBERNETES_MATRIX_VERSIONS}"
  build_node_release "${versions[0]}" && build_node_release "${versions[-1]}"
}

# cert-manager as clusterctl installs it, from its Go module: hack/certmanager
# holds thin mains over its packages (its own mains are modules the proxy does
# not serve) and renders its chart into cert-manager.yaml.
build_cert_manager() {
  local out tmp required chart
  out=$(tool_path cert-manager)
  [[ -f "${out}/cert-manager.yaml" ]] && return 0
  required=$(cd "${repo_root}/hack/certmanager" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
  if [[ "${required}" != "${CERT_MANAGER_VERSION}" ]]; then
    log "hack/certmanager/go.mod requires cert-manager ${required}, versions.env pins ${CERT_MANAGER_VERSION}: make them agree"
    return 1
  fi
  log "building cert-manager ${CERT_MANAGER_VERSION} (hack/certmanager; minutes on a cold cache)"
  tmp="${out}.tmp"
  rm -rf "${tmp}"
  mkdir -p "${tmp}"
  (
    cd "${repo_root}/hack/certmanager"
    export GOFLAGS=-mod=readonly CGO_ENABLED=0
    go build -trimpath -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=${CERT_MANAGER_VERSION}" \
      -o "${tmp}/" ./controller ./webhook ./cainjector &&
      chart="$(go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/charts/cert-manager" &&
      go run ./manifest --chart "${chart}" --version "${CERT_MANAGER_VERSION}" --kube-version "${KUBERNETES_VERSION}" --out "${tmp}/cert-manager.yaml"
  ) || { rm -rf "${tmp}"; return 1; }
  rm -rf "${out}"
  mv "${tmp}" "${out}"
}

# What Cluster API's and cert-manager's releases publish for clusterctl
# (images, components, metadata), built from source (test/tools/upstreamreleases).
build_upstream_releases() {
  build cert-manager
  [[ -f "$(tool_path upstream-releases)/releases.json" ]] && return 0
  log "building Cluster API's and cert-manager's release images and components (test/tools/upstreamreleases)"
  (cd "${repo_root}/test" && GOFLAGS=-mod=readonly go run ./tools/upstreamreleases --out "$(tool_path upstream-releases)")
}

build_envtest() {
  build_kubernetes_cmds kube-apiserver
  build_etcd
  local dir
  dir=$(tool_path envtest)
  mkdir -p "${dir}"
  ln -sf "$(tool_path kube-apiserver)" "${dir}/kube-apiserver"
  ln -sf "$(tool_path etcd)" "${dir}/etcd"
}

# go_install <name> <package> <version> [module]: from this repository's
# module when it has the module at that version (build_here), else go install.
go_install() {
  local name=$1 pkg=$2 version=$3 module=${4:-} out gobin dir
  out=$(tool_path "${name}")
  [[ -x "${out}" ]] && return 0
  log "installing ${name} ${version}"
  if [[ -n "${module}" ]] && dir=$(module_dir "${module}" "${version}" "${pkg}"); then
    build_here "${dir}" "${out}" "${pkg}"
    return
  fi
  gobin=$(mktemp -d)
  GOBIN="${gobin}" CGO_ENABLED=0 GOFLAGS= go install -trimpath "${pkg}@${version}"
  mkdir -p "$(dirname "${out}")"
  mv "${gobin}/$(basename "${pkg}")" "${out}"
  rm -rf "${gobin}"
}

# apt_install <command> <why>: installs Debian's package of that name.
apt_install() {
  apt_install_package "$1" "$2" "$(command -v "$1" || echo /nonexistent)"
}

# apt_install_package <package> <why> <file it provides>
apt_install_package() {
  [[ -e "$3" ]] && return 0
  apt_wait
  [[ -e "$3" ]] && return 0
  log "installing Debian's $1 ($2)"
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get install -y --no-install-recommends "$1" >/dev/null ||
    { "${sudo[@]}" apt-get update >/dev/null && "${sudo[@]}" apt-get install -y --no-install-recommends "$1" >/dev/null; }
}

# Debian's packages download and unpack in the background while Go compiles
# (the one needs the network, the other the CPUs); apt_install_package waits
# for them before it installs anything itself.
APT_PID=
apt_in_background() {
  [[ -z "${APT_PID}" ]] || return 0
  (
    apt_install_package libblkid-dev "Ignition links libblkid" /usr/include/blkid/blkid.h
    build cloud-init
    build podman
    install_node_packages
  ) &
  APT_PID=$!
}

apt_wait() {
  [[ -n "${APT_PID}" ]] || return 0
  local pid=${APT_PID}
  APT_PID=
  wait "${pid}" || { log "installing Debian's packages failed (see above)"; return 1; }
}

KUBERNETES_CMDS=(kube-apiserver kubeadm kubectl kube-controller-manager kube-scheduler kubelet kube-proxy)

build() {
  case "$1" in
    all)
      apt_in_background
      build_kubernetes_cmds "${KUBERNETES_CMDS[@]}"
      for t in envtest clusterctl controller-gen golangci-lint ignition-validate cloud-init podman e2e; do build "${t}"; done
      ;;
    # What the e2e machines run: kubeadm, the kubelet with containerd and the
    # control-plane images, the consumers (Ignition, cloud-init).
    e2e)
      apt_in_background
      build_kubernetes_cmds "${KUBERNETES_CMDS[@]}"
      for t in envtest kubeadm kube-controller-manager kube-scheduler kubelet node-images ignition cloud-init; do build "${t}"; done
      ;;
    envtest) build_envtest ;;
    kubeadm | kubectl | kube-controller-manager | kube-scheduler | kubelet | kube-proxy) build_kubernetes_cmds "$1" ;;
    kubeadm-matrix) build_kubeadm_matrix ;;
    upgrade-from) build_node_release "${KUBERNETES_UPGRADE_FROM_VERSION}" ;;
    oldest-newest) build_oldest_newest ;;
    node-release-*) build_node_release "${1#node-release-}" ;;
    coredns) build_coredns ;;
    node-packages) install_node_packages ;;
    node-images) build_node_images ;;
    cert-manager) build_cert_manager ;;
    upstream-releases) build_upstream_releases ;;
    ignition) build_ignition ;;
    clusterctl) build_clusterctl ;;
    controller-gen) go_install controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen "${CONTROLLER_GEN_VERSION}" sigs.k8s.io/controller-tools ;;
    ignition-validate) go_install ignition-validate github.com/coreos/ignition/v2/validate "${IGNITION_VERSION}" github.com/coreos/ignition/v2 ;;
    benchstat) go_install benchstat golang.org/x/perf/cmd/benchstat "${BENCHSTAT_VERSION}" ;;
    golangci-lint) go_install golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint "${GOLANGCI_LINT_VERSION}" ;;
    ginkgo) go_install ginkgo github.com/onsi/ginkgo/v2/ginkgo "$(ginkgo_version)" github.com/onsi/ginkgo/v2 ;;
    cloud-init) apt_install cloud-init "for its schema check" ;;
    podman) apt_install podman "to load the release's image tarballs as docker load would" ;;
    *) log "unknown tool $1"; return 1 ;;
  esac
}

if [[ "${1:-}" == path ]]; then
  tool_path "$2"
  exit 0
fi
for t in "${@:-all}"; do
  build "${t}"
done
apt_wait
