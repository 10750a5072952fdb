package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// DeepCopyInto copies c into out.
func (c *OperatingSystemConfiguration) DeepCopyInto(out *OperatingSystemConfiguration) {
	*out = *c
	out.Images = append([]MachineImage(nil), c.Images...)
	out.Arch = append([]string(nil), c.Arch...)
	if c.RegistrySecretRef != nil {
		r := *c.RegistrySecretRef
		out.RegistrySecretRef = &r
	}
	if c.Signing != nil {
		s := *c.Signing
		out.Signing = &s
	}
	c.Settings.DeepCopyInto(&out.Settings)
}

// DeepCopy returns a copy of c.
func (c *OperatingSystemConfiguration) DeepCopy() *OperatingSystemConfiguration {
	if c == nil {
		return nil
	}
	out := new(OperatingSystemConfiguration)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (c *OperatingSystemConfiguration) DeepCopyObject() runtime.Object { return c.DeepCopy() }

// DeepCopy returns a copy of s.
func (s *OperatingSystemConfigurationStatus) DeepCopy() *OperatingSystemConfigurationStatus {
	if s == nil {
		return nil
	}
	out := *s
	return &out
}

// DeepCopyObject implements runtime.Object.
func (s *OperatingSystemConfigurationStatus) DeepCopyObject() runtime.Object { return s.DeepCopy() }
