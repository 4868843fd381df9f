package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API; the same as upstream's,
	// which is what makes this provider a drop-in replacement.
	GroupVersion = schema.GroupVersion{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2"}

	schemeBuilder = runtime.NewSchemeBuilder(func(scheme *runtime.Scheme) error {
		scheme.AddKnownTypes(GroupVersion,
			&KubeadmConfig{}, &KubeadmConfigList{},
			&KubeadmConfigTemplate{}, &KubeadmConfigTemplateList{},
		)
		metav1.AddToGroupVersion(scheme, GroupVersion)
		return nil
	})

	// AddToScheme registers this API's kinds in a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)
