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

// Package objects builds the Kubernetes objects of the e2e's workload
// clusters: machines, MachineDeployments, MachinePools, KubeadmControlPlanes
// and a ClusterClass, whose specs make the simulated hosts Kubernetes nodes.
// It builds only: scenarios, Cluster API's specs (through their flavors),
// test/tools/e2eflavors and the demo create what it builds.
package objects

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// KubernetesVersion is the version of every machine: the version of the
// kubeadm and control-plane binaries hack/tools.sh builds.
const KubernetesVersion = "v1.36.3"

// NodeNamePlaceholder names nodes the way many real templates do; each
// format's consumer on the simulated host fills it with the host's name
// (cloud-init's Jinja, Afterburn's attributes, the raw agent's metadata).
const NodeNamePlaceholder = "{{ ds.meta_data.local_hostname }}"

// ProviderIDArg is the kubelet's --provider-id as real templates pass it
// (kubeletExtraArgs, from the instance's metadata): the simulated cloud's
// provider ID, which Cluster API matches Nodes to Machines with.
const ProviderIDArg = "simulated://{{ ds.meta_data.instance_id }}"

// KubeletPatch is the kubeadm patch every spec writes with its files (in
// every format) and points kubeadm at: what this machine's kernel and the
// hosts' image need from the kubelet beyond kubeadm's defaults. The hosts
// have no systemd (kubeadm defaults to its cgroup driver), and this kernel
// mounts cgroup v1 hierarchies, which kubelet 1.35+ refuses unless told.
const KubeletPatch = "cgroupDriver: cgroupfs\nfailCgroupV1: false\n"

// KubeadmPatchesDir is where the patch is written; its file name tells
// kubeadm the target (kubeletconfiguration) and the patch type (merge).
const KubeadmPatchesDir = "/etc/kubeadm/patches"

// IgnoredPreflightErrors are the kubeadm preflight checks a host in
// namespaces cannot pass; docs/e2e.md says why for each.
var IgnoredPreflightErrors = []string{"SystemVerification"}

// NodeRegistration is what every spec of the stack's clusters sets: the
// node name and provider ID from the host's metadata, and the preflight
// checks a namespace cannot pass.
func NodeRegistration() upstreambootstrapv1.NodeRegistrationOptions {
	return upstreambootstrapv1.NodeRegistrationOptions{
		Name:                  NodeNamePlaceholder,
		KubeletExtraArgs:      []upstreambootstrapv1.Arg{{Name: "provider-id", Value: ptr.To(ProviderIDArg)}},
		IgnorePreflightErrors: IgnoredPreflightErrors,
	}
}

// NodeSpec makes a spec one of this lab's nodes: its node registration in
// init and join, and the kubelet patch written by files and applied by
// kubeadm.
func NodeSpec(s *bootstrapv1.KubeadmConfigSpec) {
	s.InitConfiguration.NodeRegistration = NodeRegistration()
	s.JoinConfiguration.NodeRegistration = NodeRegistration()
	s.InitConfiguration.Patches.Directory = KubeadmPatchesDir
	s.JoinConfiguration.Patches.Directory = KubeadmPatchesDir
	s.Files = append(s.Files, upstreambootstrapv1.File{
		Path: KubeadmPatchesDir + "/kubeletconfiguration+merge.yaml", Permissions: "0644", Content: KubeletPatch,
	})
}

// Cluster is what a workload cluster's objects are built from.
type Cluster struct {
	Namespace, Name string
	// Version is the Kubernetes version of its machines, KubernetesVersion
	// when empty: the Lab boots each host with that release.
	Version string
}

func (c Cluster) version() string {
	if c.Version == "" {
		return KubernetesVersion
	}
	return c.Version
}

func (c Cluster) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: c.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}}
}

func ref(group, kind, name string) clusterv1.ContractVersionedObjectReference {
	return clusterv1.ContractVersionedObjectReference{APIGroup: group, Kind: kind, Name: name}
}

// PodCIDR is every workload cluster's pod network; kube-controller-manager
// gives each node a /24 of it, which the simulated cloud routes.
const PodCIDR = "10.244.0.0/16"

// Base returns the namespace, the SimulatedCluster and the Cluster (no
// control-plane provider: control-plane Machines are created directly).
func (c Cluster) Base() []client.Object {
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}},
		&infrav1.SimulatedCluster{ObjectMeta: c.meta(c.Name)},
		&clusterv1.Cluster{ObjectMeta: c.meta(c.Name), Spec: clusterv1.ClusterSpec{
			InfrastructureRef: ref(infrav1.GroupVersion.Group, "SimulatedCluster", c.Name),
			ClusterNetwork:    clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{PodCIDR}}},
		}},
	}
}

// ControlPlaneMachine returns a control-plane Machine with its KubeadmConfig
// of the given format (changed by the mutate functions) and its
// SimulatedMachine; the first one inits, later ones join the control plane.
func (c Cluster) ControlPlaneMachine(name string, format bootstrapv1.Format, mutate ...func(*bootstrapv1.KubeadmConfigSpec)) []client.Object {
	m := &clusterv1.Machine{ObjectMeta: c.meta(name), Spec: c.machineSpec(
		ref(bootstrapv1.GroupVersion.Group, "KubeadmConfig", name),
		ref(infrav1.GroupVersion.Group, "SimulatedMachine", name),
	)}
	m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	cfg := &bootstrapv1.KubeadmConfig{ObjectMeta: c.meta(name), Spec: bootstrapv1.KubeadmConfigSpec{
		Format:            format,
		JoinConfiguration: upstreambootstrapv1.JoinConfiguration{ControlPlane: &upstreambootstrapv1.JoinControlPlane{}},
	}}
	NodeSpec(&cfg.Spec)
	for _, f := range mutate {
		f(&cfg.Spec)
	}
	return []client.Object{cfg, &infrav1.SimulatedMachine{ObjectMeta: c.meta(name)}, m}
}

func (c Cluster) machineSpec(bootstrap, infra clusterv1.ContractVersionedObjectReference) clusterv1.MachineSpec {
	return clusterv1.MachineSpec{
		ClusterName:       c.Name,
		Version:           c.version(),
		Bootstrap:         clusterv1.Bootstrap{ConfigRef: bootstrap},
		InfrastructureRef: infra,
	}
}

// KubeadmConfigTemplate returns a worker template of the given format.
func (c Cluster) KubeadmConfigTemplate(name string, format bootstrapv1.Format) *bootstrapv1.KubeadmConfigTemplate {
	t := &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: c.meta(name), Spec: bootstrapv1.KubeadmConfigTemplateSpec{
		Template: bootstrapv1.KubeadmConfigTemplateResource{Spec: bootstrapv1.KubeadmConfigSpec{Format: format}},
	}}
	NodeSpec(&t.Spec.Template.Spec)
	return t
}

// SimulatedMachineTemplate returns a host template; bootDelay makes slow machines.
func (c Cluster) SimulatedMachineTemplate(name string, bootDelay time.Duration) *infrav1.SimulatedMachineTemplate {
	smt := &infrav1.SimulatedMachineTemplate{ObjectMeta: c.meta(name)}
	if bootDelay > 0 {
		smt.Spec.Template.Spec.BootDelay = &metav1.Duration{Duration: bootDelay}
	}
	return smt
}

// MachineDeployment returns a MachineDeployment of workers from the templates
// of those names.
func (c Cluster) MachineDeployment(name, kubeadmConfigTemplate, machineTemplate string, replicas int32) *clusterv1.MachineDeployment {
	labels := map[string]string{clusterv1.ClusterNameLabel: c.Name, clusterv1.MachineDeploymentNameLabel: name}
	return &clusterv1.MachineDeployment{ObjectMeta: c.meta(name), Spec: clusterv1.MachineDeploymentSpec{
		ClusterName: c.Name,
		Replicas:    ptr.To(replicas),
		Selector:    metav1.LabelSelector{MatchLabels: labels},
		// What Cluster API's defaulting webhook (not served here) would set.
		Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
			Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			},
		}},
		Template: clusterv1.MachineTemplateSpec{
			ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
			Spec: c.machineSpec(
				ref(bootstrapv1.GroupVersion.Group, "KubeadmConfigTemplate", kubeadmConfigTemplate),
				ref(infrav1.GroupVersion.Group, "SimulatedMachineTemplate", machineTemplate),
			),
		},
	}}
}

// Workers returns a MachineDeployment with its own templates of the given format.
func (c Cluster) Workers(name string, format bootstrapv1.Format, replicas int32, bootDelay time.Duration) []client.Object {
	return []client.Object{
		c.KubeadmConfigTemplate(name, format),
		c.SimulatedMachineTemplate(name, bootDelay),
		c.MachineDeployment(name, name, name, replicas),
	}
}

// KCPName is the name of a cluster's KubeadmControlPlane (and of the
// SimulatedMachineTemplate its machines are cloned from).
func (c Cluster) KCPName() string { return c.Name + "-control-plane" }

// KCPBase returns the namespace, the SimulatedCluster, a
// KubeadmControlPlane of replicas machines, its machine template, and the
// Cluster pointing at both. format chooses what KCP's machines render: set
// through the format annotation on KCP's machine template (KCP's own spec
// allows only cloud-config and ignition, and stays as KCP writes it).
func (c Cluster) KCPBase(replicas int32, format bootstrapv1.Format) []client.Object {
	objects := c.Base()
	cluster := objects[len(objects)-1].(*clusterv1.Cluster)
	cluster.Spec.ControlPlaneRef = ref(controlplanev1.GroupVersion.Group, "KubeadmControlPlane", c.KCPName())
	return append(objects[:len(objects)-1], c.SimulatedMachineTemplate(c.KCPName(), 0), c.KubeadmControlPlane(replicas, format), cluster)
}

// KubeadmControlPlane returns the cluster's KubeadmControlPlane.
func (c Cluster) KubeadmControlPlane(replicas int32, format bootstrapv1.Format) *controlplanev1.KubeadmControlPlane {
	spec := &bootstrapv1.KubeadmConfigSpec{}
	NodeSpec(spec)
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: c.meta(c.KCPName()), Spec: controlplanev1.KubeadmControlPlaneSpec{
		Replicas: ptr.To(replicas),
		Version:  c.version(),
		MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
			Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: ref(infrav1.GroupVersion.Group, "SimulatedMachineTemplate", c.KCPName()),
			},
		},
		KubeadmConfigSpec: UpstreamSpec(spec),
	}}
	if format != "" && format != bootstrapv1.CloudConfig {
		kcp.Spec.MachineTemplate.ObjectMeta.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(format)}
	}
	return kcp
}

// UpstreamSpec is a spec as upstream's type, for KubeadmControlPlane (which
// embeds upstream's): the fields both have, through their shared JSON.
func UpstreamSpec(s *bootstrapv1.KubeadmConfigSpec) upstreambootstrapv1.KubeadmConfigSpec {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var u upstreambootstrapv1.KubeadmConfigSpec
	if err := json.Unmarshal(b, &u); err != nil {
		panic(err)
	}
	return u
}

// MachinePool returns a MachinePool of replicas instances, its KubeadmConfig
// of the given format (one for the whole pool: every instance runs the same
// data) and its SimulatedMachinePool.
func (c Cluster) MachinePool(name string, format bootstrapv1.Format, replicas int32) []client.Object {
	cfg := &bootstrapv1.KubeadmConfig{ObjectMeta: c.meta(name), Spec: bootstrapv1.KubeadmConfigSpec{Format: format}}
	NodeSpec(&cfg.Spec)
	mp := &clusterv1.MachinePool{ObjectMeta: c.meta(name), Spec: clusterv1.MachinePoolSpec{
		ClusterName: c.Name,
		Replicas:    ptr.To(replicas),
		Template: clusterv1.MachineTemplateSpec{Spec: c.machineSpec(
			ref(bootstrapv1.GroupVersion.Group, "KubeadmConfig", name),
			ref(infrav1.GroupVersion.Group, "SimulatedMachinePool", name),
		)},
	}}
	return []client.Object{cfg, &infrav1.SimulatedMachinePool{ObjectMeta: c.meta(name)}, mp}
}
