package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Scheme holds the providerConfig types.
var Scheme = runtime.NewScheme()

var decoder runtime.Decoder

func init() {
	if err := AddToScheme(Scheme); err != nil {
		panic(err)
	}
	decoder = serializer.NewCodecFactory(Scheme, serializer.EnableStrict).UniversalDecoder(SchemeGroupVersion)
}

// Decode decodes a providerConfig (JSON or YAML, with apiVersion and
// kind); unknown and duplicated fields are errors.
func Decode(raw []byte) (*OperatingSystemConfiguration, error) {
	c := &OperatingSystemConfiguration{}
	obj, _, err := decoder.Decode(raw, nil, c)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(*OperatingSystemConfiguration)
	if !ok {
		return nil, fmt.Errorf("kind %s: want OperatingSystemConfiguration", obj.GetObjectKind().GroupVersionKind().Kind)
	}
	return c, nil
}

// DecodeStatus decodes a providerStatus the extension wrote.
func DecodeStatus(raw []byte) (*OperatingSystemConfigurationStatus, error) {
	s := &OperatingSystemConfigurationStatus{}
	obj, _, err := decoder.Decode(raw, nil, s)
	if err != nil {
		return nil, err
	}
	s, ok := obj.(*OperatingSystemConfigurationStatus)
	if !ok {
		return nil, fmt.Errorf("kind %s: want OperatingSystemConfigurationStatus", obj.GetObjectKind().GroupVersionKind().Kind)
	}
	return s, nil
}
