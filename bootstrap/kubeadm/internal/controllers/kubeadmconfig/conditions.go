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

package kubeadmconfig

import (
	"fmt"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/annotations"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// waitingReasons are states that end by themselves (Info severity in the
// v1beta1 conditions); every other False reason needs someone to act.
var waitingReasons = map[string]bool{
	bootstrapv1.KubeadmConfigOwnerNotFoundReason: true, bootstrapv1.KubeadmConfigClusterNotFoundReason: true, bootstrapv1.KubeadmConfigWaitingForClusterInfrastructureReason: true,
	bootstrapv1.KubeadmConfigWaitingForControlPlaneInitReason: true, bootstrapv1.KubeadmConfigWaitingForInitLockReason: true, bootstrapv1.KubeadmConfigWaitingForControlPlaneEndpointReason: true,
	bootstrapv1.KubeadmConfigWorkloadClusterUnreachableReason: true, bootstrapv1.KubeadmConfigCertificatesMissingReason: true, bootstrapv1.KubeadmConfigControlPlaneVersionUnavailableReason: true,
	bootstrapv1.KubeadmConfigInternalErrorReason: true,
}

// setConditionf sets a v1beta2 condition and its v1beta1 twin (status.deprecated),
// with the message passed through the scope's redaction.
func (s *scope) setConditionf(conditionType string, status metav1.ConditionStatus, reason, format string, args ...any) {
	msg := s.redact(fmt.Sprintf(format, args...))
	conditions.Set(s.cfg, metav1.Condition{Type: conditionType, Status: status, Reason: reason, Message: msg})
	v1Type := clusterv1.ConditionType(conditionType)
	switch {
	case status == metav1.ConditionTrue:
		v1beta1conditions.MarkTrue(s.cfg, v1Type)
	case waitingReasons[reason]:
		v1beta1conditions.MarkFalse(s.cfg, v1Type, reason, clusterv1.ConditionSeverityInfo, "%s", msg)
	default:
		v1beta1conditions.MarkFalse(s.cfg, v1Type, reason, clusterv1.ConditionSeverityWarning, "%s", msg)
	}
}

// deleteCondition removes a condition and its v1beta1 twin.
func (s *scope) deleteCondition(conditionType string) {
	conditions.Delete(s.cfg, conditionType)
	v1beta1conditions.Delete(s.cfg, clusterv1.ConditionType(conditionType))
}

// dataNotAvailablef reports why there is no data secret (yet).
func (s *scope) dataNotAvailablef(reason, format string, args ...any) {
	s.setConditionf(upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, metav1.ConditionFalse, reason, format, args...)
}

func (s *scope) dataAvailable() {
	s.setConditionf(upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition, metav1.ConditionTrue, bootstrapv1.KubeadmConfigDataSecretAvailableReason, "")
}

func (s *scope) certificatesNotAvailablef(status metav1.ConditionStatus, reason, format string, args ...any) {
	s.setConditionf(upstreambootstrapv1.KubeadmConfigCertificatesAvailableCondition, status, reason, format, args...)
}

func (s *scope) certificatesAvailable() {
	s.setConditionf(upstreambootstrapv1.KubeadmConfigCertificatesAvailableCondition, metav1.ConditionTrue, bootstrapv1.KubeadmConfigCertificatesAvailableReason, "")
}

// summarize computes Ready from the other conditions, as upstream does, for
// both condition generations.
func (s *scope) summarize() error {
	v1beta1conditions.SetSummary(s.cfg, v1beta1conditions.WithConditions(
		upstreambootstrapv1.DataSecretAvailableV1Beta1Condition,
		upstreambootstrapv1.CertificatesAvailableV1Beta1Condition,
	))
	return conditions.SetSummaryCondition(s.cfg, s.cfg, upstreambootstrapv1.KubeadmConfigReadyCondition,
		conditions.ForConditionTypes{
			upstreambootstrapv1.KubeadmConfigDataSecretAvailableCondition,
			upstreambootstrapv1.KubeadmConfigCertificatesAvailableCondition,
		},
		conditions.CustomMergeStrategy{
			MergeStrategy: conditions.DefaultMergeStrategy(
				conditions.ComputeReasonFunc(conditions.GetDefaultComputeMergeReasonFunc(
					upstreambootstrapv1.KubeadmConfigNotReadyReason,
					upstreambootstrapv1.KubeadmConfigReadyUnknownReason,
					upstreambootstrapv1.KubeadmConfigReadyReason,
				)),
			),
		},
	)
}

// setPaused sets the Paused condition and reports whether reconciliation is paused.
func (s *scope) setPaused() bool {
	var why []string
	if ptr.Deref(s.cluster.Spec.Paused, false) {
		why = append(why, "Cluster spec.paused is set to true")
	}
	if annotations.HasPaused(s.cfg) {
		why = append(why, "KubeadmConfig has the "+clusterv1.PausedAnnotation+" annotation")
	}
	if len(why) == 0 {
		conditions.Set(s.cfg, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
		return false
	}
	msg := why[0]
	if len(why) > 1 {
		msg += ", " + why[1]
	}
	conditions.Set(s.cfg, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue, Reason: clusterv1.PausedReason, Message: msg})
	return true
}
