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

// Package flavors writes the simulated infrastructure provider's cluster
// templates, one per flavor and format, from the builders the e2e stack makes
// its own clusters with, so the templates Cluster API's specs apply cannot
// drift from what this project's scenarios run. test/tools/e2eflavors writes them
// to test/e2e/capi/data; a test checks the committed files are current.
package flavors

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/objects"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/e2e/releases"
	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
)

// flavor is a flavor as Cluster API's specs name it ("" is the default
// template) and the objects of its template in one format; formats are the
// formats it is written in, every one when empty.
type flavor struct {
	name    string
	objects func(c objects.Cluster, f bootstrapv1.Format) []client.Object
	formats []bootstrapv1.Format
}

// CommandFormats are the formats that run commands: raw refuses
// preKubeadmCommands, which carry kcp-remediation's bootstrap hold.
var CommandFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}

// AnyFileFormats are the formats that write any file: raw writes only
// kubeadm's patches, and Cluster API's in-place update spec writes
// /tmp/test.
var AnyFileFormats = []bootstrapv1.Format{bootstrapv1.CloudConfig, bootstrapv1.Ignition}

// flavors are the templates the suite's specs use.
var flavors = []flavor{
	{name: "", objects: quickStart},
	{name: "topology", objects: quickStartTopology},
	{name: "kcp-adoption", objects: kcpAdoption},
	{name: "machine-pool", objects: machinePool},
	{name: "upgrades", objects: upgrades},
	{name: "md-remediation", objects: mdRemediation},
	{name: "kcp-md-taints", objects: kcpMDTaints},
	{name: "topology-taints", objects: topologyTaints},
	{name: "kcp-remediation", objects: kcpRemediation, formats: CommandFormats},
	{name: "self-hosted", objects: selfHosted, formats: []bootstrapv1.Format{bootstrapv1.CloudConfig}},
	{name: FormatsFlavor, objects: formatsTopology, formats: []bootstrapv1.Format{bootstrapv1.CloudConfig}},
	{name: InPlaceFlavor, objects: inPlaceTopology, formats: AnyFileFormats},
}

// classes are the ClusterClasses the flavors' Clusters name, with their
// templates; clusterctl adds clusterclass-<name>.yaml to a template whose
// class is not there yet.
var classes = map[string]func() []client.Object{
	quickStartClass: objects.Cluster{Name: quickStartClass}.ClusterClassObjects,
	inPlaceClass:    inPlaceClassObjects,
}

// quickStartClass is the ClusterClass of the topology flavor: the stack's,
// whose variables choose the formats of control plane and workers.
const quickStartClass = "quick-start"

// inPlaceClass is quickStartClass on hosts that boot from the node-update
// machine image, which carries the image of the provider's node updater:
// there is no registry to pull it from.
const inPlaceClass = "quick-start-in-place"

// InPlaceFlavor is Cluster API's in-place update spec's flavor: a Cluster
// of inPlaceClass with the rollout settings the spec's variables give.
const InPlaceFlavor = "topology-in-place"

// Sentinels stand for clusterctl's variables while the objects are typed Go
// values; Files puts the variables in their place.
const (
	controlPlaneReplicas = 987001
	workerReplicas       = 987002
	formatSentinel       = "format-987003"
	mdMaxSurge           = "md-max-surge-987004"
	mdMaxUnavailable     = "md-max-unavailable-987005"
	kcpMaxSurge          = "kcp-max-surge-987006"
)

// FormatsFlavor is the ClusterClass quick start whose format the clusterctl
// variable FormatVariable chooses: make demo's.
const FormatsFlavor = "formats"

// FormatVariable is the clusterctl variable of FormatsFlavor's format,
// cloud-config when unset.
const FormatVariable = "BOOTSTRAP_FORMAT"

// cluster is every template's cluster: clusterctl names it and puts it in
// the target namespace.
var cluster = objects.Cluster{Name: "${CLUSTER_NAME}"}

// quickStart is upstream's quick start on simulated hosts: a
// KubeadmControlPlane and one MachineDeployment, both in the format.
func quickStart(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	objects := c.KCPBase(controlPlaneReplicas, f)
	return append(objects, c.Workers(c.Name+"-md-0", f, workerReplicas, 0)...)
}

// quickStartTopology is the quick start as a Cluster of the quick-start
// ClusterClass: control plane and one MachineDeployment in the format.
func quickStartTopology(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	cl := c.ClassCluster(controlPlaneReplicas, f, objects.ClassWorkers{Name: "md-0", Format: f, Replicas: workerReplicas})
	cl.Spec.Topology.ClassRef.Name = quickStartClass
	return []client.Object{cl}
}

// formatsTopology is the quick start as a Cluster of the quick-start
// ClusterClass in the format FormatVariable says. The control plane takes it
// by the format annotation, which admits every format (the class's variable
// has no raw: KCP's format has none), the workers by their variable.
func formatsTopology(c objects.Cluster, _ bootstrapv1.Format) []client.Object {
	cl := c.ClassCluster(controlPlaneReplicas, bootstrapv1.Raw, objects.ClassWorkers{Name: "md-0", Format: formatSentinel, Replicas: workerReplicas})
	cl.Spec.Topology.ClassRef.Name = quickStartClass
	cl.Spec.Topology.ControlPlane.Metadata.Annotations[bootstrapv1.FormatAnnotation] = formatSentinel
	return []client.Object{cl}
}

// inPlaceTopology is the topology quick start of inPlaceClass whose
// rollouts the in-place update spec's variables set, as upstream's
// in-memory-topology flavor has them: KCP's maxSurge, and the workers'
// maxSurge and maxUnavailable.
func inPlaceTopology(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	cl := only[*clusterv1.Cluster](quickStartTopology(c, f))
	cl.Spec.Topology.ClassRef.Name = inPlaceClass
	cl.Spec.Topology.Variables = append(cl.Spec.Topology.Variables,
		clusterv1.ClusterVariable{Name: objects.ControlPlaneMaxSurgeVariable, Value: *objects.JSONValue(kcpMaxSurge)})
	md := &cl.Spec.Topology.Workers.MachineDeployments[0]
	md.Rollout.Strategy = clusterv1.MachineDeploymentTopologyRolloutStrategy{
		Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: clusterv1.MachineDeploymentTopologyRolloutStrategyRollingUpdate{
			MaxSurge: ptr.To(intstr.FromString(mdMaxSurge)), MaxUnavailable: ptr.To(intstr.FromString(mdMaxUnavailable)),
		},
	}
	return []client.Object{cl}
}

// inPlaceClassObjects is quickStartClass's objects under inPlaceClass's
// name, its hosts booting from the node-update machine image.
func inPlaceClassObjects() []client.Object {
	objs := objects.Cluster{Name: inPlaceClass}.ClusterClassObjects()
	for _, o := range objs {
		if t, ok := o.(*infrav1.SimulatedMachineTemplate); ok {
			t.Spec.Template.Spec.Image = releases.NodeUpdateMachineImage
		}
	}
	return objs
}

// selfHosted is the quick start on hosts that boot from the management
// machine image, which carries every provider's image: clusterctl init can
// make the cluster a management cluster with no registry to pull from.
func selfHosted(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	objects := quickStart(c, f)
	for _, o := range objects {
		if t, ok := o.(*infrav1.SimulatedMachineTemplate); ok {
			t.Spec.Template.Spec.Image = releases.MachineImage
		}
	}
	return objects
}

// kcpAdoption is a control plane Machine made without a control-plane
// provider (labelled kcp-adoption.step1), then a KubeadmControlPlane that
// adopts it (kcp-adoption.step2). The Machine's KubeadmConfig asks for the
// format the way KCP's copy would: by the format annotation for ignition and
// raw, spec unchanged, so that KCP finds it up to date.
func kcpAdoption(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	base := c.Base()
	machine := c.ControlPlaneMachine(c.Name+"-control-plane-0", "")
	step1 := append([]client.Object{only[*infrav1.SimulatedCluster](base), only[*clusterv1.Cluster](base)}, machine...)
	cfg := only[*bootstrapv1.KubeadmConfig](machine)
	// The first machine inits, and KCP tells a config that inits from one
	// that joins by its join configuration: as KCP writes it, it has none.
	cfg.Spec.JoinConfiguration = upstreambootstrapv1.JoinConfiguration{}
	if f != bootstrapv1.CloudConfig {
		cfg.Annotations = map[string]string{bootstrapv1.FormatAnnotation: string(f)}
	}
	// Step 2 updates the Cluster first: the framework updates what exists
	// by its read version, and the step's other objects would make Cluster
	// API's controllers write the Cluster in between.
	withKCP := c.KCPBase(controlPlaneReplicas, f)
	step2 := []client.Object{
		only[*clusterv1.Cluster](withKCP), only[*infrav1.SimulatedMachineTemplate](withKCP), only[*controlplanev1.KubeadmControlPlane](withKCP),
	}
	label(step1, "kcp-adoption.step1")
	label(step2, "kcp-adoption.step2")
	return append(step1, step2...)
}

// machinePool is the quick start's control plane with a MachinePool of
// workers instead of a MachineDeployment.
func machinePool(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	return append(c.KCPBase(controlPlaneReplicas, f), c.MachinePool(c.Name+"-mp-0", f, workerReplicas)...)
}

// upgrades is upstream's upgrades flavor on simulated hosts: the quick start
// with a MachinePool beside its MachineDeployment, so that the upgrade spec
// rolls every kind of machine.
func upgrades(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	return append(quickStart(c, f), c.MachinePool(c.Name+"-mp-0", f, workerReplicas)...)
}

// Remediation names the label and Node condition of upstream's
// md-remediation templates: the spec marks a worker's Node unhealthy
// through the condition, and the MachineHealthCheck selects by the label.
const (
	remediationLabel     = "e2e.remediation.label"
	remediationCondition = "e2e.remediation.condition"
)

// mdRemediation is the quick start whose workers a MachineHealthCheck
// remediates when their Node reports the remediation condition False.
func mdRemediation(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	objects := quickStart(c, f)
	md := only[*clusterv1.MachineDeployment](objects)
	md.Spec.Template.Labels[remediationLabel] = ""
	return append(objects, remediationCheck(c, map[string]string{remediationLabel: ""}))
}

// remediationCheck is upstream's MachineHealthCheck of the remediation
// specs: the machines selector matches are unhealthy once their Node has
// reported the remediation condition False for 10s, and every one of them
// may be remediated.
func remediationCheck(c objects.Cluster, selector map[string]string) *clusterv1.MachineHealthCheck {
	return &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-mhc-0", Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name}},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: c.Name,
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{
				Type: remediationCondition, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](10),
			}}},
			Remediation: clusterv1.MachineHealthCheckRemediation{TriggerIf: clusterv1.MachineHealthCheckRemediationTriggerIf{
				UnhealthyLessThanOrEqualTo: ptr.To(intstr.FromString("100%")),
			}},
		},
	}
}

// preExistingTaints are the taints of upstream's kcp-md-taints templates:
// one the Machine puts on its Node once, one it keeps there.
var preExistingTaints = []clusterv1.MachineTaint{
	{
		Key: "pre-existing-on-initialization-taint", Value: "on-initialization-value",
		Effect: corev1.TaintEffectPreferNoSchedule, Propagation: clusterv1.MachineTaintPropagationOnInitialization,
	},
	{
		Key: "pre-existing-always-taint", Value: "always-value",
		Effect: corev1.TaintEffectPreferNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways,
	},
}

// kcpMDTaints is the quick start whose control plane and workers carry
// preExistingTaints, for the spec that changes them in place.
func kcpMDTaints(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	objects := quickStart(c, f)
	only[*controlplanev1.KubeadmControlPlane](objects).Spec.MachineTemplate.Spec.Taints = slices.Clone(preExistingTaints)
	only[*clusterv1.MachineDeployment](objects).Spec.Template.Spec.Taints = slices.Clone(preExistingTaints)
	return objects
}

// topologyTaints is the ClusterClass quick start whose control plane and
// workers carry preExistingTaints in the Cluster's topology.
func topologyTaints(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	objects := quickStartTopology(c, f)
	topology := &only[*clusterv1.Cluster](objects).Spec.Topology
	topology.ControlPlane.Taints = slices.Clone(preExistingTaints)
	topology.Workers.MachineDeployments[0].Taints = slices.Clone(preExistingTaints)
	return objects
}

// waitSignal holds a control-plane machine's bootstrap until Cluster API's
// KCP remediation spec sets "signal: pass" in its mhc-test ConfigMap on the
// management cluster, then acknowledges with "ack-pass". The spec fills
// TOKEN, SERVER and NAMESPACE; curl and jq are on the node.
const waitSignal = `#!/bin/bash
set -o errexit -o pipefail
token=$1 server=$2 namespace=$3
configmap="$server/api/v1/namespaces/$namespace/configmaps/mhc-test"
echo "waiting for the signal in $configmap"
until [ "$(curl -k -s -H "Authorization: Bearer $token" "$configmap" | jq -r '.data.signal // empty')" = pass ]; do
  sleep 1
done
curl -k -s -H "Authorization: Bearer $token" -X PATCH -H "Content-Type: application/merge-patch+json" \
  --data '{"data":{"signal":"ack-pass"}}' "$configmap" >/dev/null
`

// kcpRemediation is upstream's kcp-remediation flavor: a control plane
// whose machines wait for the spec's signal before kubeadm runs (a script
// at the root, run by a relative path, as upstream's template does), no
// workers, and a MachineHealthCheck over the control-plane machines the spec
// labels mhc-test: fail, which remediates a machine with no Node after 30s
// or whose Node reports the remediation condition False.
func kcpRemediation(c objects.Cluster, f bootstrapv1.Format) []client.Object {
	objects := quickStart(c, f)
	spec := &only[*controlplanev1.KubeadmControlPlane](objects).Spec.KubeadmConfigSpec
	spec.Files = append(spec.Files, upstreambootstrapv1.File{Path: "/wait-signal.sh", Content: waitSignal, Permissions: "0777"})
	spec.PreKubeadmCommands = append(spec.PreKubeadmCommands, `./wait-signal.sh "${TOKEN}" "${SERVER}" "${NAMESPACE}"`)
	mhc := remediationCheck(c, map[string]string{clusterv1.MachineControlPlaneLabel: "", "mhc-test": "fail"})
	mhc.Spec.Checks.NodeStartupTimeoutSeconds = ptr.To[int32](30)
	return append(objects, mhc)
}

// only is the one object of type T among objects; the builders make each
// kind once per call, so anything else is a mistake in this file.
func only[T client.Object](objects []client.Object) T {
	var found []T
	for _, o := range objects {
		if t, ok := o.(T); ok {
			found = append(found, t)
		}
	}
	if len(found) != 1 {
		panic(fmt.Sprintf("%d objects of type %T, want one", len(found), *new(T)))
	}
	return found[0]
}

// label adds a label, with an empty value, to every object.
func label(objects []client.Object, key string) {
	for _, o := range objects {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[key] = ""
		o.SetLabels(l)
	}
}

// variables replace the sentinels and the stack's fixed version with the
// variables `clusterctl generate cluster` fills.
var variables = strings.NewReplacer(
	fmt.Sprintf("replicas: %d", controlPlaneReplicas), "replicas: ${CONTROL_PLANE_MACHINE_COUNT}",
	fmt.Sprintf("replicas: %d", workerReplicas), "replicas: ${WORKER_MACHINE_COUNT}",
	"version: "+objects.KubernetesVersion, "version: ${KUBERNETES_VERSION}",
	formatSentinel, "${"+FormatVariable+":=cloud-config}",
	mdMaxSurge, "${MD_MAX_SURGE:-20%}",
	mdMaxUnavailable, "${MD_MAX_UNAVAILABLE:-0}",
	kcpMaxSurge, `"${KUBEADM_CONTROL_PLANE_MAX_SURGE:-1}"`,
)

// header opens every written template.
const header = "# Generated by test/tools/e2eflavors from test/e2e/objects' builders: do not edit.\n"

// Files returns every template by file name: the clusters
// (cluster-template[-flavor][-format].yaml) and their ClusterClasses
// (clusterclass-<name>.yaml).
func Files() (map[string][]byte, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, fl := range flavors {
		formats := fl.formats
		if len(formats) == 0 {
			formats = bootstrapv1.Formats
		}
		for _, f := range formats {
			name := TemplateName(fl.name, f)
			data, err := template(scheme, fl.objects(cluster, f))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			files[name] = data
		}
	}
	for class, objects := range classes {
		name := "clusterclass-" + class + ".yaml"
		data, err := template(scheme, objects())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files[name] = data
	}
	return files, nil
}

// TemplateName is the file clusterctl reads for a flavor in a format.
func TemplateName(flavor string, f bootstrapv1.Format) string {
	return "cluster-template" + suffix(flavor) + suffix(formatName(f)) + ".yaml"
}

// FlavorName is the flavor Cluster API's specs are given for a flavor in a
// format: the flavor with the format's name after it, cloud-config (the
// default format) without ("" and cloud-config is the default template).
func FlavorName(flavor string, f bootstrapv1.Format) string {
	return strings.TrimPrefix(suffix(flavor)+suffix(formatName(f)), "-")
}

// formatName is how a format appears in flavor names: the default none.
func formatName(f bootstrapv1.Format) string {
	if f == bootstrapv1.CloudConfig {
		return ""
	}
	return string(f)
}

func suffix(name string) string {
	if name == "" {
		return ""
	}
	return "-" + name
}

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clusterv1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// template writes the objects as one YAML stream, without what the server
// sets (status, creation time) and without namespaces, which clusterctl
// chooses.
func template(scheme *runtime.Scheme, objects []client.Object) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(header)
	for _, o := range objects {
		if _, ok := o.(*corev1.Namespace); ok {
			continue
		}
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return nil, err
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
		delete(u, "status")
		if meta, ok := u["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		b, err := yaml.Marshal(u)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.WriteString(variables.Replace(string(b)))
	}
	return out.Bytes(), nil
}

// Names returns the file names Files writes, sorted.
func Names(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
