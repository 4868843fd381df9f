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

// Package initlock is the per-cluster lock that lets one control-plane
// machine run kubeadm init. It is upstream's ConfigMap lock, same name and
// content, so that a lock taken under one provider is honoured by the other
// across a swap; unlike upstream's, it reads the lock from the API server
// (never a cache that may lag) and deletes exactly the lock it read, so a
// stale read can never delete a lock another machine took since.
package initlock

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// informationKey and holder are the ConfigMap's content as upstream writes it.
const informationKey = "lock-information"

type holder struct {
	MachineName string `json:"machineName"`
}

// Lock is the init lock of the clusters it is asked about.
type Lock struct {
	// Reader reads the lock and its holder from the API server, uncached.
	Reader client.Reader
	// Writer creates and deletes the lock.
	Writer client.Writer
}

// Acquire reports whether machine holds cluster's lock, taking it when it is
// free or its holder no longer exists.
func (l Lock) Acquire(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) bool {
	log := ctrl.LoggerFrom(ctx, "ConfigMap", klog.KRef(cluster.Namespace, bootstrapv1.InitLockName(cluster.Name)))
	cm, who, err := l.read(ctx, cluster)
	if err != nil {
		log.Error(err, "Reading the control-plane init lock")
		return false
	}
	if cm != nil {
		if who == machine.Name {
			return true
		}
		if who != "" {
			err := l.Reader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: who}, &clusterv1.Machine{})
			if !apierrors.IsNotFound(err) {
				if err != nil {
					log.Error(err, "Reading the Machine that holds the control-plane init lock", "Machine", who)
				}
				return false
			}
			log.Info("The Machine that held the control-plane init lock is gone; releasing it", "Machine", who)
		}
		if !l.delete(ctx, cm) {
			return false
		}
	}
	info, err := json.Marshal(holder{MachineName: machine.Name})
	if err != nil {
		return false
	}
	err = l.Writer.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster.Namespace,
			Name:      bootstrapv1.InitLockName(cluster.Name),
			Labels:    map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
			}},
		},
		Data: map[string]string{informationKey: string(info)},
	})
	switch {
	case apierrors.IsAlreadyExists(err):
		return false
	case err != nil:
		log.Error(err, "Taking the control-plane init lock")
		return false
	}
	return true
}

// Release deletes cluster's lock when machine holds it, or whoever holds it
// when machine is nil (initialization is over). It reports whether no lock of
// that holder remains.
func (l Lock) Release(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) bool {
	cm, who, err := l.read(ctx, cluster)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Reading the control-plane init lock to release it")
		return false
	}
	if cm == nil || (machine != nil && who != machine.Name) {
		return true
	}
	return l.delete(ctx, cm)
}

// read returns the lock and its holder's name ("" when unreadable), or nil.
func (l Lock) read(ctx context.Context, cluster *clusterv1.Cluster) (*corev1.ConfigMap, string, error) {
	cm := &corev1.ConfigMap{}
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: bootstrapv1.InitLockName(cluster.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("reading the init lock: %w", err)
	}
	var h holder
	if err := json.Unmarshal([]byte(cm.Data[informationKey]), &h); err != nil {
		return cm, "", nil //nolint:nilerr // a lock whose content is not upstream's is held by someone unknown
	}
	return cm, h.MachineName, nil
}

// delete removes exactly the lock that was read: a lock taken again since
// (another UID or version) stays.
func (l Lock) delete(ctx context.Context, cm *corev1.ConfigMap) bool {
	err := l.Writer.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	if err == nil || apierrors.IsNotFound(err) {
		return true
	}
	if !apierrors.IsConflict(err) {
		ctrl.LoggerFrom(ctx).Error(err, "Releasing the control-plane init lock")
	}
	return false
}
