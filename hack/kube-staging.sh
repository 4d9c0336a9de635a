# Sourced by the build scripts: the staging modules of k8s.io/kubernetes. Its go.mod
# points them at ./staging, which a dependent module cannot see, so a helper module that
# builds a Kubernetes command replaces each by its published v0.x twin.
kube_staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
  cloud-provider cluster-bootstrap code-generator component-base component-helpers
  controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
  endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
  kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission
  sample-apiserver sample-cli-plugin sample-controller)

# kube_helper_module DIR NAME KUBE_VERSION writes the go.mod of a helper module that
# builds a Kubernetes command at KUBE_VERSION.
kube_helper_module() {
  local dir="$1" name="$2" version="$3"
  mkdir -p "$dir"
  {
    echo "module eva.local/$name"
    echo
    echo "go 1.24"
    echo
    for m in "${kube_staging[@]}"; do echo "replace k8s.io/$m => k8s.io/$m v0.${version#1.}"; done
  } >"$dir/go.mod"
}
