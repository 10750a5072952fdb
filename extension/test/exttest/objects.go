package exttest

import (
	"encoding/json"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// KeyResource is the name of the shoot's resource (spec.resources) of
// its cosign key, which providerConfigs name; KeySecretName is the
// Secret's name in the project namespace, and KeySecretCopy the copy
// gardenlet keeps in the shoot's namespace in the seed.
const (
	KeyResource   = "cosign"
	KeySecretName = "pool-key"
	KeySecretCopy = v1beta1constants.ReferencedResourcesPrefix + KeySecretName
)

// Cluster is the Cluster gardenlet writes for a shoot: its CloudProfile,
// Seed and Shoot (with the worker pool of our OS type and version).
func Cluster(ns, project, shoot, pool, version string) *extensionsv1alpha1.Cluster {
	gv := gardencorev1beta1.SchemeGroupVersion.String()
	s := &gardencorev1beta1.Shoot{
		TypeMeta:   metav1.TypeMeta{APIVersion: gv, Kind: "Shoot"},
		ObjectMeta: metav1.ObjectMeta{Name: shoot, Namespace: "garden-" + project},
		Spec: gardencorev1beta1.ShootSpec{Provider: gardencorev1beta1.Provider{Type: "local", Workers: []gardencorev1beta1.Worker{{
			Name: pool, Machine: gardencorev1beta1.Machine{Type: "m1", Image: &gardencorev1beta1.ShootMachineImage{Name: Type, Version: ptr.To(version)}},
		}}},
			// The shoot owner's cosign key Secret (KeySecretName in the
			// project namespace), referenced as "cosign".
			Resources: []gardencorev1beta1.NamedResourceReference{{Name: KeyResource,
				ResourceRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "v1", Kind: "Secret", Name: KeySecretName}}}},
	}
	return &extensionsv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: extensionsv1alpha1.ClusterSpec{
			CloudProfile: raw(&gardencorev1beta1.CloudProfile{TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "CloudProfile"}}),
			Seed:         ptr.To(raw(&gardencorev1beta1.Seed{TypeMeta: metav1.TypeMeta{APIVersion: gv, Kind: "Seed"}})),
			Shoot:        raw(s),
		},
	}
}

func raw(o any) runtime.RawExtension {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

// Config is a providerConfig: the base for every version, the target
// Host/os/{namespace}/{pool}, signed with the namespace's cosign Secret.
func (e *Env) Config() *configv1alpha1.OperatingSystemConfiguration {
	return &configv1alpha1.OperatingSystemConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: configv1alpha1.SchemeGroupVersion.String(), Kind: "OperatingSystemConfiguration"},
		Base:     e.Base,
		Target:   e.Host + "/os/{namespace}/{pool}",
		Signing:  &configv1alpha1.Signing{KeySecretRef: configv1alpha1.SecretReference{Name: KeyResource}},
	}
}

// OSC is an OSC of the harness's type as gardenlet writes it (the pool
// label, the operation annotation) with the given providerConfig (any
// value that marshals to JSON; nil: none) and a unit with its file.
func OSC(ns, name, pool string, purpose extensionsv1alpha1.OperatingSystemConfigPurpose, providerConfig any, body string) *extensionsv1alpha1.OperatingSystemConfig {
	perm := uint32(0o644)
	var pc *runtime.RawExtension
	if providerConfig != nil {
		pc = &runtime.RawExtension{Raw: mustJSON(providerConfig)}
	}
	return &extensionsv1alpha1.OperatingSystemConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{v1beta1constants.LabelWorkerPool: pool},
			Annotations: map[string]string{v1beta1constants.GardenerOperation: v1beta1constants.GardenerOperationReconcile,
				v1beta1constants.GardenerTimestamp: time.Now().UTC().Format(time.RFC3339Nano)}},
		Spec: extensionsv1alpha1.OperatingSystemConfigSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: Type, ProviderConfig: pc},
			Purpose:     purpose,
			Units: []extensionsv1alpha1.Unit{{Name: "hello.service", Enable: ptr.To(true),
				Content:   ptr.To("[Unit]\nDescription=hello\n[Service]\nExecStart=/usr/local/bin/hello\n[Install]\nWantedBy=multi-user.target\n"),
				FilePaths: []string{"/usr/local/bin/hello"}}},
			Files: []extensionsv1alpha1.File{{Path: "/usr/local/bin/hello", Permissions: ptr.To(uint32(0o755)),
				Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: "#!/bin/sh\necho " + body + "\n"}}},
				{Path: "/etc/hello.conf", Permissions: &perm,
					Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: body + "\n"}}}},
		},
	}
}

func mustJSON(v any) []byte {
	if b, ok := v.([]byte); ok {
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Get reads an OSC.
func (e *Env) Get(osc *extensionsv1alpha1.OperatingSystemConfig) (*extensionsv1alpha1.OperatingSystemConfig, error) {
	var o extensionsv1alpha1.OperatingSystemConfig
	err := e.Client.Get(e.Ctx, client.ObjectKeyFromObject(osc), &o)
	return &o, err
}
