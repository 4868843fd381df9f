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

package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// ManagerUser is the user the manager runs as in tests: it has exactly the
// rights the release grants the manager's service account.
const ManagerUser = "cabpk-manager"

// ManagerConfig is a client configuration for ManagerUser: the generated
// ClusterRole (config/rbac/role.yaml) bound cluster-wide, and the leader
// election Role's rules (a Role in the provider's namespace in a release)
// bound in every namespace, since tests pick the lease's namespace. With
// OwnerReferencesPermissionEnforcement on, what the manager does with it is
// what a restricted management cluster allows.
func (e *Environment) ManagerConfig() (*rest.Config, error) {
	user, err := e.managerUser()
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

// ManagerKubeconfig is ManagerConfig as a kubeconfig, for a manager binary.
func (e *Environment) ManagerKubeconfig() ([]byte, error) {
	user, err := e.managerUser()
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// ProviderKubeconfig is a kubeconfig of user with the rights a provider's
// release grants its manager, as ManagerConfig has this provider's: rbacDir
// is the provider's config/rbac, with its generated role.yaml and its
// leader_election_role.yaml.
func (e *Environment) ProviderKubeconfig(user, rbacDir string) ([]byte, error) {
	u, err := e.providerUser(user, rbacDir)
	if err != nil {
		return nil, err
	}
	return u.KubeConfig()
}

func (e *Environment) managerUser() (*envtest.AuthenticatedUser, error) {
	return e.providerUser(ManagerUser, filepath.Join(RepoRoot(), "bootstrap", "kubeadm", "config", "rbac"))
}

func (e *Environment) providerUser(user, dir string) (*envtest.AuthenticatedUser, error) {
	c, err := client.New(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	for _, f := range []struct{ file, kind string }{{"role.yaml", "ClusterRole"}, {"leader_election_role.yaml", "Role"}} {
		data, err := os.ReadFile(filepath.Join(dir, f.file))
		if err != nil {
			return nil, err
		}
		var role struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(data, &role); err != nil {
			return nil, fmt.Errorf("%s: %w", f.file, err)
		}
		name := user + "-" + f.file[:len(f.file)-len(".yaml")]
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: role.Rules}
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		for _, o := range []client.Object{cr, crb} {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("granting %s the rights of %s: %w", user, f.file, err)
			}
		}
	}
	return e.env.AddUser(envtest.User{Name: user}, nil)
}
