package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of PoolImage.
var GroupVersion = schema.GroupVersion{Group: "oslayer.dev", Version: "v1alpha1"}

// AddToScheme registers the group's types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PoolImage{}, &PoolImageList{})
	metav1AddToGroupVersion(s)
	return nil
}
