//go:build !race

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

package conversion

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	upstreamv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	upstreamv1beta2 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	conversionutil "sigs.k8s.io/cluster-api/util/conversion"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// Cluster API's fuzz helpers convert 10000 random objects each way
// (spoke → hub → spoke and hub → spoke → hub) and require them unchanged.
// The fuzz functions below keep the random objects inside what the API
// server admits and what the v1beta1 → v1beta2 contract preserves; the
// hub side always covers this provider's additions (format raw, Butane).
// Disabled under -race, where 40000 conversions take too long.
func TestFuzzyConversion(t *testing.T) {
	t.Run("KubeadmConfig", conversionutil.SpokeConverterFuzzTestFunc(
		conversionutil.SpokeConverterFuzzTestFuncInput[*bootstrapv1.KubeadmConfig, *upstreamv1beta1.KubeadmConfig]{
			ConvertSpokeToHubFunc: ConvertKubeadmConfigV1Beta1ToHub,
			ConvertHubToSpokeFunc: ConvertKubeadmConfigHubToV1Beta1,
			FuzzerFuncs:           []fuzzer.FuzzerFuncs{fuzzFuncs},
		}))
	t.Run("KubeadmConfigTemplate", conversionutil.SpokeConverterFuzzTestFunc(
		conversionutil.SpokeConverterFuzzTestFuncInput[*bootstrapv1.KubeadmConfigTemplate, *upstreamv1beta1.KubeadmConfigTemplate]{
			ConvertSpokeToHubFunc: ConvertKubeadmConfigTemplateV1Beta1ToHub,
			ConvertHubToSpokeFunc: ConvertKubeadmConfigTemplateHubToV1Beta1,
			FuzzerFuncs:           []fuzzer.FuzzerFuncs{fuzzFuncs},
		}))
}

func fuzzFuncs(_ runtimeserializer.CodecFactory) []any {
	return []any{
		hubSpec,
		hubStatus,
		hubNodeRegistration,
		hubTokenString,
		spokeSpec,
		spokeStatus,
		spokeClusterConfiguration,
		spokeAPIServer,
		spokeDiscovery,
		spokeBootstrapToken,
		spokeTokenString,
	}
}

// A bootstrap token travels as "id.secret" in v1beta1; only well-formed ones survive.
func hubTokenString(in *upstreamv1beta2.BootstrapTokenString, _ randfill.Continue) {
	in.ID, in.Secret = "abcdef", "0123456789abcdef"
}

func spokeTokenString(in *upstreamv1beta1.BootstrapTokenString, _ randfill.Continue) {
	in.ID, in.Secret = "abcdef", "0123456789abcdef"
}

var hubFormats = []bootstrapv1.Format{"", bootstrapv1.CloudConfig, bootstrapv1.Ignition, bootstrapv1.Raw}

func hubSpec(in *bootstrapv1.KubeadmConfigSpec, c randfill.Continue) {
	c.FillNoCustom(in)

	// This provider's additions, as admission lets them through: a known
	// format, Butane only for ignition and never beside a Container Linux Config.
	in.Format = hubFormats[c.Intn(len(hubFormats))]
	if in.Format != bootstrapv1.Ignition || in.Ignition.ContainerLinuxConfig.IsDefined() {
		in.Ignition.Butane = bootstrapv1.ButaneConfig{}
	} else if c.Bool() {
		in.Ignition.Butane = bootstrapv1.ButaneConfig{AdditionalConfig: "variant: flatcar\nversion: 1.1.0\n" + c.String(20), Strict: ptr.To(c.Bool())}
	}

	// v1beta1 has one control-plane health-check timeout for init and join.
	initTimeout := in.InitConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds
	if in.JoinConfiguration.IsDefined() || initTimeout != nil {
		in.JoinConfiguration.Timeouts.ControlPlaneComponentHealthCheckSeconds = initTimeout
	}

	cc := &in.ClusterConfiguration
	for _, envs := range []**[]upstreamv1beta2.EnvVar{&cc.APIServer.ExtraEnvs, &cc.ControllerManager.ExtraEnvs, &cc.Scheduler.ExtraEnvs, &cc.Etcd.Local.ExtraEnvs} {
		if *envs != nil && **envs == nil {
			*envs = nil
		}
	}
	// v1beta1 args are a map of strings: a missing value comes back empty.
	for _, args := range [][]upstreamv1beta2.Arg{cc.APIServer.ExtraArgs, cc.ControllerManager.ExtraArgs, cc.Scheduler.ExtraArgs, cc.Etcd.Local.ExtraArgs,
		in.InitConfiguration.NodeRegistration.KubeletExtraArgs, in.JoinConfiguration.NodeRegistration.KubeletExtraArgs} {
		for i := range args {
			if args[i].Value == nil {
				args[i].Value = ptr.To("")
			}
		}
	}
	for i := range in.DiskSetup.Partitions {
		if in.DiskSetup.Partitions[i].Layout == nil {
			in.DiskSetup.Partitions[i].Layout = ptr.To(false) // required in v1beta1
		}
	}
}

func hubNodeRegistration(in *upstreamv1beta2.NodeRegistrationOptions, c randfill.Continue) {
	c.FillNoCustom(in)
	if in.Taints != nil && *in.Taints == nil {
		in.Taints = nil
	}
}

func hubStatus(in *bootstrapv1.KubeadmConfigStatus, c randfill.Continue) {
	c.FillNoCustom(in)
	// v1beta1 always carries its own status fields, so the hub gets them back.
	if in.Deprecated == nil {
		in.Deprecated = &upstreamv1beta2.KubeadmConfigDeprecatedStatus{}
	}
	if in.Deprecated.V1Beta1 == nil {
		in.Deprecated.V1Beta1 = &upstreamv1beta2.KubeadmConfigV1Beta1DeprecatedStatus{}
	}
}

// nilIfZero sets *p to nil when it points at a zero value: v1beta2 has no
// pointer there, so v1beta1 cannot tell "empty" from "absent".
func nilIfZero[T any](p **T) {
	if *p != nil && reflect.ValueOf(**p).IsZero() {
		*p = nil
	}
}

func nilIfEmptyString(p **string) {
	if *p != nil && **p == "" {
		*p = nil
	}
}

func spokeSpec(in *upstreamv1beta1.KubeadmConfigSpec, c randfill.Continue) {
	c.FillNoCustom(in)
	in.UseExperimentalRetryJoin = false //nolint:staticcheck // removed in v1beta2, not preserved

	for i := range in.Users {
		u := &in.Users[i]
		for _, s := range []**string{&u.Gecos, &u.Groups, &u.HomeDir, &u.Shell, &u.Passwd, &u.PrimaryGroup, &u.Sudo} {
			nilIfEmptyString(s)
		}
		nilIfZero(&u.PasswdFrom)
	}
	for i := range in.Files {
		nilIfZero(&in.Files[i].ContentFrom)
	}
	if in.DiskSetup != nil {
		for i := range in.DiskSetup.Partitions {
			nilIfEmptyString(&in.DiskSetup.Partitions[i].TableType)
		}
		for i := range in.DiskSetup.Filesystems {
			nilIfEmptyString(&in.DiskSetup.Filesystems[i].Partition)
			nilIfEmptyString(&in.DiskSetup.Filesystems[i].ReplaceFS)
		}
	}
	if in.InitConfiguration != nil {
		nilIfZero(&in.InitConfiguration.Patches)
	}
	if in.JoinConfiguration != nil {
		nilIfZero(&in.JoinConfiguration.Patches)
	}
	if in.Ignition != nil {
		nilIfZero(&in.Ignition.ContainerLinuxConfig)
	}
	nilIfZero(&in.Ignition)
	nilIfZero(&in.DiskSetup)
	nilIfZero(&in.NTP)
	nilIfZero(&in.ClusterConfiguration)
	nilIfZero(&in.InitConfiguration)
	nilIfZero(&in.JoinConfiguration)
}

func spokeStatus(in *upstreamv1beta1.KubeadmConfigStatus, c randfill.Continue) {
	c.FillNoCustom(in)
	nilIfZero(&in.V1Beta2)
	nilIfEmptyString(&in.DataSecretName)
}

func spokeClusterConfiguration(in *upstreamv1beta1.ClusterConfiguration, c randfill.Continue) {
	c.FillNoCustom(in)
	// Removed in v1beta2 (Cluster API fills them from the Cluster), not preserved.
	in.Networking.ServiceSubnet, in.Networking.PodSubnet, in.Networking.DNSDomain = "", "", ""
	in.KubernetesVersion, in.ClusterName = "", ""
	nilIfZero(&in.Etcd.Local)
	nilIfZero(&in.Etcd.External)
}

// v1beta2 keeps durations in whole seconds.
func wholeSeconds(d **metav1.Duration, c randfill.Continue) {
	if *d != nil {
		*d = &metav1.Duration{Duration: time.Duration(c.Int31()) * time.Second}
	}
}

func spokeAPIServer(in *upstreamv1beta1.APIServer, c randfill.Continue) {
	c.FillNoCustom(in)
	wholeSeconds(&in.TimeoutForControlPlane, c)
}

func spokeBootstrapToken(in *upstreamv1beta1.BootstrapToken, c randfill.Continue) {
	c.FillNoCustom(in)
	wholeSeconds(&in.TTL, c)
	nilIfZero(&in.Expires)
}

func spokeDiscovery(in *upstreamv1beta1.Discovery, c randfill.Continue) {
	c.FillNoCustom(in)
	wholeSeconds(&in.Timeout, c)
	if in.File != nil && in.File.KubeConfig != nil {
		kc := in.File.KubeConfig
		nilIfZero(&kc.Cluster)
		nilIfZero(&kc.User.AuthProvider)
		nilIfZero(&kc.User.Exec)
		nilIfZero(&in.File.KubeConfig)
	}
	nilIfZero(&in.File)
	nilIfZero(&in.BootstrapToken)
}
