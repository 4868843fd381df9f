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

package plan

import (
	"fmt"
	"strings"

	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// CertificatesFor returns the cluster certificates an action needs, without
// key material, at the paths the spec puts them on the machine
// (clusterConfiguration.certificatesDir, joinConfiguration.caCertPath), as
// Cluster API's util/secret lays them out.
func CertificatesFor(action Action, spec *bootstrapv1.KubeadmConfigSpec) secret.Certificates {
	switch action {
	case ActionInit:
		return secret.NewCertificatesForInitialControlPlane(&spec.ClusterConfiguration)
	case ActionJoinControlPlane:
		return secret.NewControlPlaneJoinCerts(&spec.ClusterConfiguration)
	default:
		return secret.NewCertificatesForWorker(spec.JoinConfiguration.CACertPath)
	}
}

// LoadCertificates fills in the key pairs of c from a PKI tree in kubeadm's
// layout (ca.crt, ca.key, etcd/ca.crt, front-proxy-ca.*, sa.*), read with
// readFile by path relative to the tree. Keys are read for control-plane
// actions only: a worker needs just the CA certificate, to pin discovery.
// User-supplied external etcd certificates are left alone.
func LoadCertificates(c secret.Certificates, action Action, readFile func(rel string) ([]byte, error)) error {
	layout := secret.NewCertificatesForInitialControlPlane(nil)
	rel := func(p string) string { return strings.TrimPrefix(p, secret.DefaultCertificatesDir+"/") }
	for _, cert := range c {
		ref := layout.GetByPurpose(cert.Purpose)
		if ref == nil || cert.External {
			continue
		}
		kp := &certs.KeyPair{}
		var err error
		if kp.Cert, err = readFile(rel(ref.CertFile)); err != nil {
			return fmt.Errorf("reading the %s certificate: %w", cert.Purpose, err)
		}
		if action.IsControlPlane() {
			if kp.Key, err = readFile(rel(ref.KeyFile)); err != nil {
				return fmt.Errorf("reading the %s key: %w", cert.Purpose, err)
			}
		}
		cert.KeyPair = kp
	}
	return nil
}
