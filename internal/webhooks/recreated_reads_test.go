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

package webhooks

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// countingReader finds nothing and counts how often it was asked.
type countingReader struct{ gets int }

func (c *countingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	c.gets++
	return fmt.Errorf("not found")
}

func (c *countingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("not listed")
}

// TestRecreationReadsAFewOwnersAtMost: a create naming a thousand owners
// costs at most maxOwnerReads reads, and references of other groups or
// kinds, or without a UID, none.
func TestRecreationReadsAFewOwnersAtMost(t *testing.T) {
	c := &bootstrapv1.KubeadmConfig{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}}
	for i := range 1000 {
		kind := []string{"Machine", "MachinePool", "Cluster", "ClusterClass"}[i%4]
		c.OwnerReferences = append(c.OwnerReferences,
			metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))},
			metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Machine", Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))},
			metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: fmt.Sprint(i), UID: types.UID(fmt.Sprint(i))},
			metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: fmt.Sprint(i)})
	}
	r := &countingReader{}
	if (recreation{r}).of(context.Background(), c) {
		t.Fatal("owners that do not exist vouched for the config")
	}
	if r.gets != maxOwnerReads {
		t.Fatalf("%d reads for one request, want %d", r.gets, maxOwnerReads)
	}
}
