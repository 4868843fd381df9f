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

package objects

import (
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// The ClusterClass's variables: the format of the control plane's machines
// and of workers (a MachineDeployment overrides workerFormat for itself).
const (
	ControlPlaneFormatVariable = "controlPlaneFormat"
	WorkerFormatVariable       = "workerFormat"
	// The variables of etcd's and CoreDNS's image tags, by the names Cluster
	// API's upgrade specs set them (UpgradeClusterTopologyAndWaitForUpgrade).
	EtcdImageTagVariable    = "etcdImageTag"
	CoreDNSImageTagVariable = "coreDNSImageTag"
	// WorkerRevisionVariable, when set, gives workers of every format a
	// kubeadm patch file (RevisionPatchFile) and a kubelet flag
	// (RevisionLabel): a change a scenario makes to see what rolls.
	WorkerRevisionVariable = "workerRevision"
	// FilesVariable adds files ({path, content}) to every machine, after
	// the class's own; Cluster API's in-place update spec changes it.
	FilesVariable = "files"
	// ControlPlaneMaxSurgeVariable is KCP's rollout maxSurge, KCP's
	// default when empty, by the name Cluster API's classes give it.
	ControlPlaneMaxSurgeVariable = "kubeadmControlPlaneMaxSurge"
)

// RevisionPatchFile is the kubeadm patch the workerRevision variable writes:
// the kubelet's containerLogMaxSize, in MiB, is the revision.
const RevisionPatchFile = KubeadmPatchesDir + "/kubeletconfiguration1+merge.yaml"

// RevisionLabel is the node label the workerRevision variable has the
// kubelet register with (--node-labels), its value the revision.
const RevisionLabel = "e2e.cabpk-formats.example/revision"

// WorkerClass is the ClusterClass's one MachineDeployment class and its one
// MachinePool class. Each has its own KubeadmConfigTemplate, alike, as
// Cluster API's classes have: its specs copy a class's templates one by one.
const WorkerClass = "worker"

// FormatPatchFile is the file the ClusterClass's format-specific patches
// have machines write by their format's own means: cloud-config workers by
// a cloud-init command, Ignition workers by Butane's storage.files, Ignition
// control planes by a Container Linux Config's. Its content is the format
// that wrote it; raw machines, and cloud-config control planes, have none.
const FormatPatchFile = "/etc/cabpk-e2e/format-patch"

// ClusterClassObjects returns a ClusterClass named after the cluster and its
// templates, the way quick-start templates are built: a
// KubeadmControlPlaneTemplate, this provider's KubeadmConfigTemplate for
// workers, the simulated cloud's templates, two variables choosing the
// formats, two setting etcd's and CoreDNS's image tags, and workerRevision
// (see WorkerRevisionVariable). The format patches do what each format needs
// and nothing else:
//   - controlPlaneFormat (cloud-config or ignition) sets KCP's own
//     kubeadmConfigSpec.format, and Ignition extras in its
//     containerLinuxConfig. Raw control planes are chosen by the format
//     annotation in the Cluster's topology (see ClassCluster): Cluster API
//     keeps KCP's machine template metadata out of the patches' reach.
//   - workerFormat sets spec.format of the workers' KubeadmConfigTemplate,
//     Ignition extras in spec.ignition.butane and cloud-config extras in
//     preKubeadmCommands (raw takes neither).
func (c Cluster) ClusterClassObjects() []client.Object {
	name := c.Name
	cpSpec := &bootstrapv1.KubeadmConfigSpec{}
	NodeSpec(cpSpec)
	// KCP's admission refuses dropping clusterConfiguration as a whole, so
	// a class changed there and changed back must start with one: the API
	// server certificate's names, as Cluster API's quick-start class has.
	cpSpec.ClusterConfiguration.APIServer.CertSANs = []string{"localhost", "127.0.0.1"}
	kcpTemplate := &controlplanev1.KubeadmControlPlaneTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-control-plane"},
		Spec: controlplanev1.KubeadmControlPlaneTemplateSpec{Template: controlplanev1.KubeadmControlPlaneTemplateResource{
			Spec: controlplanev1.KubeadmControlPlaneTemplateResourceSpec{KubeadmConfigSpec: UpstreamSpec(cpSpec)},
		}},
	}
	workerTemplate := c.KubeadmConfigTemplate(name+"-worker", bootstrapv1.CloudConfig)
	workerTemplate.Labels = nil
	poolTemplate := c.KubeadmConfigTemplate(name+"-worker-pool", bootstrapv1.CloudConfig)
	poolTemplate.Labels = nil
	classRef := func(gv, kind string, o client.Object) clusterv1.ClusterClassTemplateReference {
		return clusterv1.ClusterClassTemplateReference{APIVersion: gv, Kind: kind, Name: o.GetName()}
	}
	infraCluster := &infrav1.SimulatedClusterTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	cpMachines := &infrav1.SimulatedMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-control-plane"}}
	workerMachines := &infrav1.SimulatedMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-worker"}}
	workerPools := &infrav1.SimulatedMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name + "-worker-pool"}}
	infraGV := infrav1.GroupVersion.String()

	controlPlane := clusterv1.PatchSelector{APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlaneTemplate",
		MatchResources: clusterv1.PatchSelectorMatch{ControlPlane: ptr.To(true)}}
	workers := clusterv1.PatchSelector{APIVersion: bootstrapv1.GroupVersion.String(), Kind: "KubeadmConfigTemplate",
		MatchResources: clusterv1.PatchSelectorMatch{
			MachineDeploymentClass: &clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: []string{WorkerClass}},
			MachinePoolClass:       &clusterv1.PatchSelectorMatchMachinePoolClass{Names: []string{WorkerClass}},
		}}
	when := func(variable string, format bootstrapv1.Format) string {
		return fmt.Sprintf("{{ eq .%s %q }}", variable, format)
	}
	patch := func(name, enabledIf string, selector clusterv1.PatchSelector, patches ...clusterv1.JSONPatch) clusterv1.ClusterClassPatch {
		return clusterv1.ClusterClassPatch{Name: name, EnabledIf: enabledIf,
			Definitions: []clusterv1.PatchDefinition{{Selector: selector, JSONPatches: patches}}}
	}
	fromVariable := func(path, variable string) clusterv1.JSONPatch {
		return clusterv1.JSONPatch{Op: "add", Path: path, ValueFrom: &clusterv1.JSONPatchValue{Variable: variable}}
	}
	fromTemplate := func(path, template string) clusterv1.JSONPatch {
		return clusterv1.JSONPatch{Op: "add", Path: path, ValueFrom: &clusterv1.JSONPatchValue{Template: template}}
	}
	whenSet := func(variable string) string { return fmt.Sprintf("{{ ne .%s \"\" }}", variable) }
	add := func(path string, value any) clusterv1.JSONPatch {
		return clusterv1.JSONPatch{Op: "add", Path: path, Value: JSONValue(value)}
	}
	writeFormatCommand := []string{fmt.Sprintf("mkdir -p /etc/cabpk-e2e && echo %s > %s", bootstrapv1.CloudConfig, FormatPatchFile)}
	// Butane's variant and version may be left out: the provider's own are assumed.
	butane := fmt.Sprintf("storage:\n  files:\n  - path: %s\n    mode: 0644\n    contents:\n      inline: %s\n", FormatPatchFile, bootstrapv1.Ignition)
	containerLinuxConfig := fmt.Sprintf("storage:\n  files:\n  - path: %s\n    filesystem: root\n    mode: 0644\n    contents:\n      inline: %s\n", FormatPatchFile, bootstrapv1.Ignition)

	class := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: classRef(infraGV, "SimulatedClusterTemplate", infraCluster)},
			ControlPlane: clusterv1.ControlPlaneClass{
				TemplateRef:           classRef(controlplanev1.GroupVersion.String(), "KubeadmControlPlaneTemplate", kcpTemplate),
				MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{TemplateRef: classRef(infraGV, "SimulatedMachineTemplate", cpMachines)},
			},
			Workers: clusterv1.WorkersClass{
				MachineDeployments: []clusterv1.MachineDeploymentClass{{
					Class:          WorkerClass,
					Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: classRef(bootstrapv1.GroupVersion.String(), "KubeadmConfigTemplate", workerTemplate)},
					Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: classRef(infraGV, "SimulatedMachineTemplate", workerMachines)},
				}},
				MachinePools: []clusterv1.MachinePoolClass{{
					Class:          WorkerClass,
					Bootstrap:      clusterv1.MachinePoolClassBootstrapTemplate{TemplateRef: classRef(bootstrapv1.GroupVersion.String(), "KubeadmConfigTemplate", poolTemplate)},
					Infrastructure: clusterv1.MachinePoolClassInfrastructureTemplate{TemplateRef: classRef(infraGV, "SimulatedMachinePoolTemplate", workerPools)},
				}},
			},
			Variables: []clusterv1.ClusterClassVariable{
				formatVariable(ControlPlaneFormatVariable, bootstrapv1.CloudConfig, bootstrapv1.Ignition),
				formatVariable(WorkerFormatVariable, bootstrapv1.Formats...),
				imageTagVariable(EtcdImageTagVariable),
				imageTagVariable(CoreDNSImageTagVariable),
				{Name: WorkerRevisionVariable, Required: ptr.To(false), Schema: clusterv1.VariableSchema{
					OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Pattern: "^[1-9][0-9]{0,2}$|^$", Default: JSONValue("")},
				}},
				filesVariable(),
				emptyByDefault(ControlPlaneMaxSurgeVariable),
			},
			Patches: []clusterv1.ClusterClassPatch{
				patch("control-plane-ignition", when(ControlPlaneFormatVariable, bootstrapv1.Ignition), controlPlane,
					add("/spec/template/spec/kubeadmConfigSpec/format", bootstrapv1.Ignition),
					add("/spec/template/spec/kubeadmConfigSpec/ignition", map[string]any{"containerLinuxConfig": map[string]any{"additionalConfig": containerLinuxConfig}})),
				patch("worker-format", "", workers, fromVariable("/spec/template/spec/format", WorkerFormatVariable)),
				patch("worker-cloud-config", when(WorkerFormatVariable, bootstrapv1.CloudConfig), workers,
					add("/spec/template/spec/preKubeadmCommands", writeFormatCommand)),
				patch("worker-ignition", when(WorkerFormatVariable, bootstrapv1.Ignition), workers,
					add("/spec/template/spec/ignition", map[string]any{"butane": map[string]any{"additionalConfig": butane}})),
				patch("files", whenGiven(FilesVariable), controlPlane,
					fromTemplate("/spec/template/spec/kubeadmConfigSpec/files", filesTemplate(cpSpec.Files))),
				patch("worker-files", whenGiven(FilesVariable), workers,
					fromTemplate("/spec/template/spec/files", filesTemplate(UpstreamSpec(&workerTemplate.Spec.Template.Spec).Files))),
				patch("control-plane-max-surge", whenSet(ControlPlaneMaxSurgeVariable), controlPlane,
					fromTemplate("/spec/template/spec/rollout", "strategy:\n  type: RollingUpdate\n  rollingUpdate:\n    maxSurge: {{ ."+ControlPlaneMaxSurgeVariable+" }}")),
				// Files and kubelet flags are taken in every format (raw:
				// the file is a kubeadm patch, which the agent writes).
				patch("worker-revision", whenSet(WorkerRevisionVariable), workers,
					fromTemplate("/spec/template/spec/files/-", fmt.Sprintf("path: %q\npermissions: \"0644\"\ncontent: \"containerLogMaxSize: {{ .%s }}Mi\\n\"", RevisionPatchFile, WorkerRevisionVariable)),
					fromTemplate("/spec/template/spec/joinConfiguration/nodeRegistration/kubeletExtraArgs/-", fmt.Sprintf("name: node-labels\nvalue: %s={{ .%s }}", RevisionLabel, WorkerRevisionVariable))),
				patch("etcd-image-tag", whenSet(EtcdImageTagVariable), controlPlane,
					fromTemplate("/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/etcd", "local:\n  imageTag: {{ ."+EtcdImageTagVariable+" }}")),
				patch("coredns-image-tag", whenSet(CoreDNSImageTagVariable), controlPlane,
					fromTemplate("/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/dns", "imageTag: {{ ."+CoreDNSImageTagVariable+" }}")),
			},
		},
	}
	return []client.Object{infraCluster, cpMachines, workerMachines, workerPools, kcpTemplate, workerTemplate, poolTemplate, class}
}

// filesVariable is FilesVariable's definition: a list of files, each a
// path and its content.
func filesVariable() clusterv1.ClusterClassVariable {
	str := clusterv1.JSONSchemaProps{Type: "string"}
	return clusterv1.ClusterClassVariable{Name: FilesVariable, Required: ptr.To(false), Schema: clusterv1.VariableSchema{
		OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "array", Items: &clusterv1.JSONSchemaProps{
			Type: "object", Required: []string{"path", "content"},
			Properties: map[string]clusterv1.JSONSchemaProps{"path": str, "content": str},
		}},
	}}
}

// whenGiven enables a patch when a variable without a default is set.
func whenGiven(variable string) string { return fmt.Sprintf("{{ if .%s }}true{{ end }}", variable) }

// filesTemplate is a patch template of a template's files: its own, then
// those of FilesVariable.
func filesTemplate(own []upstreambootstrapv1.File) string {
	var b strings.Builder
	for _, f := range own {
		j, err := json.Marshal(f)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "- %s\n", j)
	}
	fmt.Fprintf(&b, "{{- range .%s }}\n- path: {{ .path | toJson }}\n  content: {{ .content | toJson }}\n{{- end }}", FilesVariable)
	return b.String()
}

// imageTagVariable is a variable of an image tag KCP sets, empty (kubeadm's
// own) when not given.
func imageTagVariable(name string) clusterv1.ClusterClassVariable { return emptyByDefault(name) }

// emptyByDefault is a string variable, empty when not given.
func emptyByDefault(name string) clusterv1.ClusterClassVariable {
	return clusterv1.ClusterClassVariable{Name: name, Required: ptr.To(false), Schema: clusterv1.VariableSchema{
		OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Default: JSONValue("")},
	}}
}

// formatVariable is a variable that takes one of formats, cloud-config when
// not given.
func formatVariable(name string, formats ...bootstrapv1.Format) clusterv1.ClusterClassVariable {
	var enum []apiextensionsv1.JSON
	for _, f := range formats {
		enum = append(enum, *JSONValue(f))
	}
	return clusterv1.ClusterClassVariable{Name: name, Required: ptr.To(false), Schema: clusterv1.VariableSchema{
		OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string", Enum: enum, Default: JSONValue(bootstrapv1.CloudConfig)},
	}}
}

// ClassWorkers is one MachineDeployment of a ClusterClass cluster's
// topology, or one MachinePool if Pool.
type ClassWorkers struct {
	Name     string
	Format   bootstrapv1.Format
	Replicas int32
	Pool     bool
}

// ClassCluster returns a Cluster of the ClusterClass ClusterClassObjects
// makes: a control plane of controlPlaneReplicas machines of
// controlPlaneFormat, and the given MachineDeployments and MachinePools. A raw control plane
// is asked for by the format annotation in the topology's control-plane
// metadata (which Cluster API puts on KCP's machine template, and which no
// ClusterClass patch may change); cloud-config and Ignition by the
// controlPlaneFormat variable (KCP's own field).
func (c Cluster) ClassCluster(controlPlaneReplicas int32, controlPlaneFormat bootstrapv1.Format, mds ...ClassWorkers) *clusterv1.Cluster {
	var workers clusterv1.WorkersTopology
	for _, md := range mds {
		format := []clusterv1.ClusterVariable{{Name: WorkerFormatVariable, Value: *JSONValue(md.Format)}}
		if md.Pool {
			workers.MachinePools = append(workers.MachinePools, clusterv1.MachinePoolTopology{
				Class: WorkerClass, Name: md.Name, Replicas: ptr.To(md.Replicas),
				Variables: clusterv1.MachinePoolVariables{Overrides: format},
			})
			continue
		}
		workers.MachineDeployments = append(workers.MachineDeployments, clusterv1.MachineDeploymentTopology{
			Class: WorkerClass, Name: md.Name, Replicas: ptr.To(md.Replicas),
			Variables: clusterv1.MachineDeploymentVariables{Overrides: format},
		})
	}
	cluster := &clusterv1.Cluster{ObjectMeta: c.meta(c.Name), Spec: clusterv1.ClusterSpec{
		ClusterNetwork: clusterv1.ClusterNetwork{Pods: clusterv1.NetworkRanges{CIDRBlocks: []string{PodCIDR}}},
		Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: c.Name},
			Version:      c.version(),
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To(controlPlaneReplicas)},
			Workers:      workers,
		},
	}}
	if controlPlaneFormat == bootstrapv1.Raw {
		cluster.Spec.Topology.ControlPlane.Metadata.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(bootstrapv1.Raw)}
	} else {
		cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: ControlPlaneFormatVariable, Value: *JSONValue(controlPlaneFormat)}}
	}
	return cluster
}

// JSONValue is v as a variable's or a patch's JSON value.
func JSONValue(v any) *apiextensionsv1.JSON {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}
