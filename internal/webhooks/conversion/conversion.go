/*
Copyright The cabpk-formats Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package conversion serves bootstrap.cluster.x-k8s.io/v1beta1 next to this
// provider's v1beta2 (the hub and storage version), as upstream's kubeadm
// bootstrap provider does.
//
// v1beta1 is upstream's own: its Go types and CRD schema come unchanged from
// sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1, and every field the
// two projects share goes through upstream's conversion functions. Between
// them and this provider's hub sits one step, hub ↔ upstream's v1beta2, which
// differs from ours only by what this project adds: format "raw",
// spec.ignition.butane and spec.gzipUserData. v1beta1 cannot express them, so they travel in
// Cluster API's conversion-data annotation, which here holds this provider's
// hub object instead of upstream's (a superset, so upstream's own restore code
// still finds every field it looks for).
package conversion

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	upstreamv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	upstreamv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	upstreamconversion "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/conversion"
	conversionutil "sigs.k8s.io/cluster-api/util/conversion"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// AddToScheme registers the v1beta1 kinds (upstream's types) that the
// conversion webhook decodes.
var AddToScheme = upstreamv1beta1.AddToScheme

// KubeadmConfig converts KubeadmConfig between v1beta1 and the v1beta2 hub.
var KubeadmConfig = ctrlconversion.NewHubSpokeConverter(&bootstrapv1.KubeadmConfig{},
	ctrlconversion.NewSpokeConverter(&upstreamv1beta1.KubeadmConfig{}, ConvertKubeadmConfigHubToV1Beta1, ConvertKubeadmConfigV1Beta1ToHub),
)

// KubeadmConfigTemplate converts KubeadmConfigTemplate between v1beta1 and the v1beta2 hub.
var KubeadmConfigTemplate = ctrlconversion.NewHubSpokeConverter(&bootstrapv1.KubeadmConfigTemplate{},
	ctrlconversion.NewSpokeConverter(&upstreamv1beta1.KubeadmConfigTemplate{}, ConvertKubeadmConfigTemplateHubToV1Beta1, ConvertKubeadmConfigTemplateV1Beta1ToHub),
)

// ConvertKubeadmConfigHubToV1Beta1 converts the hub to v1beta1.
func ConvertKubeadmConfigHubToV1Beta1(ctx context.Context, src *bootstrapv1.KubeadmConfig, dst *upstreamv1beta1.KubeadmConfig) error {
	up := &upstreamv1beta2.KubeadmConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreamv1beta2.GroupVersion.String(), Kind: "KubeadmConfig"},
		ObjectMeta: src.ObjectMeta,
		Spec:       toUpstreamSpec(&src.Spec),
		Status:     upstreamv1beta2.KubeadmConfigStatus(src.Status),
	}
	if err := upstreamconversion.ConvertKubeadmConfigHubToV1Beta1(ctx, up, dst); err != nil {
		return err
	}
	// Upstream stored its own hub; store ours, which also has what only this
	// provider knows. Metadata stays out, as upstream does.
	stored := &bootstrapv1.KubeadmConfig{TypeMeta: src.TypeMeta, Spec: src.Spec, Status: src.Status}
	return conversionutil.MarshalDataUnsafeNoCopy(stored, dst)
}

// ConvertKubeadmConfigV1Beta1ToHub converts v1beta1 to the hub.
func ConvertKubeadmConfigV1Beta1ToHub(ctx context.Context, src *upstreamv1beta1.KubeadmConfig, dst *bootstrapv1.KubeadmConfig) error {
	// Read the stored hub before upstream's conversion consumes the annotation.
	restored := &bootstrapv1.KubeadmConfig{}
	hasRestored, err := storedHub(src, restored)
	if err != nil {
		return err
	}
	up := &upstreamv1beta2.KubeadmConfig{}
	if err := upstreamconversion.ConvertKubeadmConfigV1Beta1ToHub(ctx, src, up); err != nil {
		return err
	}
	dst.ObjectMeta = up.ObjectMeta
	dst.Spec = fromUpstreamSpec(&up.Spec)
	dst.Status = bootstrapv1.KubeadmConfigStatus(up.Status)
	if hasRestored {
		restoreExtensions(&restored.Spec, &dst.Spec)
	}
	return nil
}

// ConvertKubeadmConfigTemplateHubToV1Beta1 converts the hub to v1beta1.
func ConvertKubeadmConfigTemplateHubToV1Beta1(ctx context.Context, src *bootstrapv1.KubeadmConfigTemplate, dst *upstreamv1beta1.KubeadmConfigTemplate) error {
	up := &upstreamv1beta2.KubeadmConfigTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreamv1beta2.GroupVersion.String(), Kind: "KubeadmConfigTemplate"},
		ObjectMeta: src.ObjectMeta,
		Spec: upstreamv1beta2.KubeadmConfigTemplateSpec{Template: upstreamv1beta2.KubeadmConfigTemplateResource{
			ObjectMeta: src.Spec.Template.ObjectMeta,
			Spec:       toUpstreamSpec(&src.Spec.Template.Spec),
		}},
	}
	if err := upstreamconversion.ConvertKubeadmConfigTemplateHubToV1Beta1(ctx, up, dst); err != nil {
		return err
	}
	stored := &bootstrapv1.KubeadmConfigTemplate{TypeMeta: src.TypeMeta, Spec: src.Spec}
	return conversionutil.MarshalDataUnsafeNoCopy(stored, dst)
}

// ConvertKubeadmConfigTemplateV1Beta1ToHub converts v1beta1 to the hub.
func ConvertKubeadmConfigTemplateV1Beta1ToHub(ctx context.Context, src *upstreamv1beta1.KubeadmConfigTemplate, dst *bootstrapv1.KubeadmConfigTemplate) error {
	restored := &bootstrapv1.KubeadmConfigTemplate{}
	hasRestored, err := storedHub(src, restored)
	if err != nil {
		return err
	}
	up := &upstreamv1beta2.KubeadmConfigTemplate{}
	if err := upstreamconversion.ConvertKubeadmConfigTemplateV1Beta1ToHub(ctx, src, up); err != nil {
		return err
	}
	dst.ObjectMeta = up.ObjectMeta
	dst.Spec.Template.ObjectMeta = up.Spec.Template.ObjectMeta
	dst.Spec.Template.Spec = fromUpstreamSpec(&up.Spec.Template.Spec)
	if hasRestored {
		restoreExtensions(&restored.Spec.Template.Spec, &dst.Spec.Template.Spec)
	}
	return nil
}

// storedHub reads the hub object a down-conversion stored in obj's
// annotations, leaving them as they are.
func storedHub(obj metav1.Object, into any) (bool, error) {
	data, ok := obj.GetAnnotations()[conversionutil.DataAnnotation]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal([]byte(data), into); err != nil {
		// The annotation is ours and never holds secrets; its content stays out of the message anyway.
		return false, fmt.Errorf("reading annotation %s: %w", conversionutil.DataAnnotation, err)
	}
	return true, nil
}

// restoreExtensions puts back what v1beta1 cannot express, unless the v1beta1
// writer chose otherwise: format raw comes back while the v1beta1 format is
// still empty (as down-conversion left it), and Butane comes back while the
// format is ignition and no Container Linux Config took its place (the two
// exclude each other); gzipUserData always comes back.
func restoreExtensions(restored, dst *bootstrapv1.KubeadmConfigSpec) {
	dst.GzipUserData = restored.GzipUserData
	if restored.Format == bootstrapv1.Raw && dst.Format == "" {
		dst.Format = bootstrapv1.Raw
	}
	if restored.Ignition.Butane.IsDefined() && dst.Format == bootstrapv1.Ignition && !dst.Ignition.ContainerLinuxConfig.IsDefined() {
		dst.Ignition.Butane = restored.Ignition.Butane
	}
}

// toUpstreamSpec maps this provider's spec onto upstream's v1beta2 spec. The
// shared fields have the same types; format raw, which upstream's schema
// lacks, becomes empty, and Butane and gzipUserData are left out (all kept by
// the caller in the conversion-data annotation).
func toUpstreamSpec(in *bootstrapv1.KubeadmConfigSpec) upstreamv1beta2.KubeadmConfigSpec {
	out := upstreamv1beta2.KubeadmConfigSpec{
		ClusterConfiguration: in.ClusterConfiguration,
		InitConfiguration:    in.InitConfiguration,
		JoinConfiguration:    in.JoinConfiguration,
		Files:                in.Files,
		DiskSetup:            in.DiskSetup,
		Mounts:               in.Mounts,
		BootCommands:         in.BootCommands,
		PreKubeadmCommands:   in.PreKubeadmCommands,
		PostKubeadmCommands:  in.PostKubeadmCommands,
		Users:                in.Users,
		NTP:                  in.NTP,
		Verbosity:            in.Verbosity,
		Ignition:             upstreamv1beta2.IgnitionSpec{ContainerLinuxConfig: in.Ignition.ContainerLinuxConfig},
	}
	if in.Format != bootstrapv1.Raw {
		out.Format = upstreamv1beta2.Format(in.Format)
	}
	return out
}

// fromUpstreamSpec is toUpstreamSpec's inverse for the shared fields.
func fromUpstreamSpec(in *upstreamv1beta2.KubeadmConfigSpec) bootstrapv1.KubeadmConfigSpec {
	return bootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: in.ClusterConfiguration,
		InitConfiguration:    in.InitConfiguration,
		JoinConfiguration:    in.JoinConfiguration,
		Files:                in.Files,
		DiskSetup:            in.DiskSetup,
		Mounts:               in.Mounts,
		BootCommands:         in.BootCommands,
		PreKubeadmCommands:   in.PreKubeadmCommands,
		PostKubeadmCommands:  in.PostKubeadmCommands,
		Users:                in.Users,
		NTP:                  in.NTP,
		Format:               bootstrapv1.Format(in.Format),
		Verbosity:            in.Verbosity,
		Ignition:             bootstrapv1.IgnitionSpec{ContainerLinuxConfig: in.Ignition.ContainerLinuxConfig},
	}
}
