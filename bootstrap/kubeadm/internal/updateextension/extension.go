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

// Package updateextension serves Cluster API's in-place update hooks for
// KubeadmConfigs: CanUpdateMachine (asked by KubeadmControlPlane) and
// CanUpdateMachineSet (asked by MachineDeployment rollouts) answer with the
// changes a running machine can take, as internal/inplace/claims computes
// them from the field table. Cluster API replaces a machine whenever any
// other difference is left. UpdateMachine (asked by the Machine controller
// until it is done) applies the change on the node through nodeupdate.
package updateextension

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/server"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/internal/nodeupdate"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/inplace/claims"
)

// Handler names, part of the paths an ExtensionConfig's discovery finds.
const (
	CanUpdateMachineName    = "can-update-machine"
	CanUpdateMachineSetName = "can-update-machineset"
	UpdateMachineName       = "update-machine"
)

// retryAfter is how long Cluster API waits before asking again about an
// update in progress.
const retryAfter = 5

// Handlers answers the in-place update hooks.
type Handlers struct {
	Updater *nodeupdate.Updater
	// Recorder records failed updates on their Machines.
	Recorder events.EventRecorder
}

// AddToServer registers the handlers on a Runtime extension server.
func AddToServer(s *server.Server, h *Handlers) error {
	for _, eh := range []server.ExtensionHandler{
		{Hook: runtimehooksv1.CanUpdateMachine, Name: CanUpdateMachineName, HandlerFunc: h.CanUpdateMachine},
		{Hook: runtimehooksv1.CanUpdateMachineSet, Name: CanUpdateMachineSetName, HandlerFunc: h.CanUpdateMachineSet},
		{Hook: runtimehooksv1.UpdateMachine, Name: UpdateMachineName, HandlerFunc: h.UpdateMachine},
	} {
		if err := s.AddExtensionHandler(eh); err != nil {
			return fmt.Errorf("adding the %s handler: %w", eh.Name, err)
		}
	}
	return nil
}

// CanUpdateMachine claims the in-place changes of one machine's
// KubeadmConfig, and its Kubernetes version when nodes can get binaries.
func (h *Handlers) CanUpdateMachine(ctx context.Context, req *runtimehooksv1.CanUpdateMachineRequest, resp *runtimehooksv1.CanUpdateMachineResponse) {
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(&req.Desired.Machine))
	p, err := h.claim(req.Current.BootstrapConfig, req.Desired.BootstrapConfig, "KubeadmConfig", claims.ConfigSpec, versionChange{
		current: req.Current.Machine.Spec.Version, desired: req.Desired.Machine.Spec.Version, path: claims.MachineVersion,
	})
	if err != nil {
		fail(&resp.CommonResponse, err)
		return
	}
	resp.BootstrapConfigPatch, resp.MachinePatch = p.config, p.version
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	log.V(4).Info("Answered CanUpdateMachine", "claimed", p.config.IsDefined(), "version", p.version.IsDefined())
}

// CanUpdateMachineSet claims the in-place changes of a MachineSet's
// KubeadmConfigTemplate, and its Kubernetes version when nodes can get
// binaries.
func (h *Handlers) CanUpdateMachineSet(ctx context.Context, req *runtimehooksv1.CanUpdateMachineSetRequest, resp *runtimehooksv1.CanUpdateMachineSetResponse) {
	log := ctrl.LoggerFrom(ctx).WithValues("MachineSet", klog.KObj(&req.Desired.MachineSet))
	p, err := h.claim(req.Current.BootstrapConfigTemplate, req.Desired.BootstrapConfigTemplate, "KubeadmConfigTemplate", claims.TemplateSpec, versionChange{
		current: req.Current.MachineSet.Spec.Template.Spec.Version, desired: req.Desired.MachineSet.Spec.Template.Spec.Version, path: claims.MachineSetVersion,
	})
	if err != nil {
		fail(&resp.CommonResponse, err)
		return
	}
	resp.BootstrapConfigTemplatePatch, resp.MachineSetPatch = p.config, p.version
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	log.V(4).Info("Answered CanUpdateMachineSet", "claimed", p.config.IsDefined(), "version", p.version.IsDefined())
}

// UpdateMachine applies the desired KubeadmConfig to the machine's node and
// answers in progress until the node reports the update done or failed.
// It keeps nothing in memory: each call reads where the update stands.
func (h *Handlers) UpdateMachine(ctx context.Context, req *runtimehooksv1.UpdateMachineRequest, resp *runtimehooksv1.UpdateMachineResponse) {
	machine := klog.KObj(&req.Desired.Machine)
	log := ctrl.LoggerFrom(ctx).WithValues("Machine", machine)
	st, err := h.update(ctx, machine, req.Desired.BootstrapConfig)
	if err != nil {
		fail(&resp.CommonResponse, err)
		log.Error(err, "UpdateMachine failed")
		return
	}
	resp.Message = st.Message
	switch st.State {
	case nodeupdate.Failed:
		resp.Status = runtimehooksv1.ResponseStatusFailure
		h.report(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: machine.Name}, st.Message)
	case nodeupdate.InProgress:
		resp.Status = runtimehooksv1.ResponseStatusSuccess
		resp.RetryAfterSeconds = retryAfter
	default:
		resp.Status = runtimehooksv1.ResponseStatusSuccess
	}
	log.V(2).Info("Answered UpdateMachine", "state", st.State, "message", st.Message)
}

// report records a failed update on its Machine, where users look: Cluster
// API's Updating condition only says that the hook failed. The message
// names the step, never file contents.
func (h *Handlers) report(ctx context.Context, key client.ObjectKey, message string) {
	m := &clusterv1.Machine{}
	if err := h.Updater.Reader.Get(ctx, key, m); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Reading the Machine to report its failed update on")
		return
	}
	h.Recorder.Eventf(m, nil, corev1.EventTypeWarning, bootstrapv1.InPlaceUpdateFailedEvent, "UpdateMachine", "%s", message)
}

// update moves the machine's update to its desired KubeadmConfig along.
func (h *Handlers) update(ctx context.Context, machine klog.ObjectRef, desired runtime.RawExtension) (nodeupdate.Status, error) {
	ours, err := isOurs(desired, "KubeadmConfig")
	if err != nil {
		return nodeupdate.Status{}, err
	}
	if !ours {
		return nodeupdate.Status{}, fmt.Errorf("Machine %s is not bootstrapped by a KubeadmConfig", machine)
	}
	cfg := &bootstrapv1.KubeadmConfig{}
	if err := json.Unmarshal(desired.Raw, cfg); err != nil {
		return nodeupdate.Status{}, err
	}
	return h.Updater.Update(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: machine.Name}, cfg)
}

// patches are what a claim gives: for the bootstrap object, and for the
// Machine's or MachineSet's version.
type patches struct {
	config, version runtimehooksv1.Patch
}

// versionChange is the Kubernetes version of the machines before and
// after, and where it sits in the object the hook asks about.
type versionChange struct {
	current, desired string
	path             []string
}

// claim returns the patches for a pair of bootstrap objects and the
// versions of their machines, and none when the objects are not this
// provider's kind: another bootstrap provider's machines are not ours to
// change. A version is claimed only when nodes can get its binaries.
func (h *Handlers) claim(current, desired runtime.RawExtension, kind string, spec []string, v versionChange) (patches, error) {
	for _, o := range []runtime.RawExtension{current, desired} {
		ours, err := isOurs(o, kind)
		if err != nil || !ours {
			return patches{}, err
		}
	}
	var p patches
	var err error
	movesTo := ""
	if h.Updater.KubernetesBinaries != "" {
		if p.version, err = claims.Version(v.current, v.desired, v.path); err != nil {
			return patches{}, err
		}
		if p.version.IsDefined() {
			movesTo = v.desired
		}
	}
	if p.config, err = claims.Claim(current, desired, spec, movesTo); err != nil {
		return patches{}, err
	}
	return p, nil
}

// isOurs reports whether a bootstrap object is this provider's kind. An
// absent object (a Machine without bootstrap config) is not.
func isOurs(o runtime.RawExtension, kind string) (bool, error) {
	if len(o.Raw) == 0 {
		return false, nil
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(o.Raw, &tm); err != nil {
		return false, fmt.Errorf("bootstrap config is not a JSON object: %w", err)
	}
	return tm.APIVersion == bootstrapv1.GroupVersion.String() && tm.Kind == kind, nil
}

// fail answers a hook with an error. Messages come from the claim, which
// names fields, never their values.
func fail(resp *runtimehooksv1.CommonResponse, err error) {
	resp.Status = runtimehooksv1.ResponseStatusFailure
	resp.Message = err.Error()
}
