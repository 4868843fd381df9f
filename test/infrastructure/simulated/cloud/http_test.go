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

package cloud

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	infrav1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/api/v1alpha1"
	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// recorder is a Cloud that keeps what it was asked and answers from its
// tables: the other end of the wire for the client's tests.
type recorder struct {
	balancers map[string]int
	hosts     map[string]HostSpec
	networks  map[string]host.PodNetwork
	fail      error
}

func newRecorder() *recorder {
	return &recorder{balancers: map[string]int{}, hosts: map[string]HostSpec{}, networks: map[string]host.PodNetwork{}}
}

var lbAddr = netip.MustParseAddr("10.213.7.254")

func (r *recorder) LoadBalancer(_ context.Context, key string, port int) (netip.Addr, error) {
	r.balancers[key] = port
	return lbAddr, r.fail
}

func (r *recorder) RemoveLoadBalancer(_ context.Context, key string) error {
	delete(r.balancers, key)
	return r.fail
}

func (r *recorder) StartHost(_ context.Context, spec HostSpec) (Instance, error) {
	if r.fail != nil {
		return Instance{}, r.fail
	}
	r.hosts[spec.Name] = spec
	return r.instance(spec.Name), nil
}

func (r *recorder) Host(_ context.Context, name string) (Instance, bool, error) {
	if _, ok := r.hosts[name]; !ok {
		return Instance{}, false, nil
	}
	return r.instance(name), true, nil
}

func (r *recorder) instance(name string) Instance {
	return Instance{Name: name, Address: netip.MustParseAddr("10.213.7.2"),
		Status: host.Status{Phase: infrav1.HostBootstrapped, Consumer: "cloud-init"}}
}

func (r *recorder) StopHost(_ context.Context, name string) error {
	delete(r.hosts, name)
	return nil
}

func (r *recorder) SetPodNetwork(_ context.Context, name string, n host.PodNetwork) error {
	r.networks[name] = n
	return nil
}

func serve(t *testing.T, c Cloud) *Client {
	t.Helper()
	srv := httptest.NewServer(Handler(c))
	t.Cleanup(srv.Close)
	client, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// TestClientReachesTheCloud makes every call over HTTP and checks that the
// cloud got exactly what the client was given, and the client exactly what
// the cloud answered.
func TestClientReachesTheCloud(t *testing.T) {
	ctx := context.Background()
	r := newRecorder()
	c := serve(t, r)

	key := "endpoint:ns-1/cluster-1"
	addr, err := c.LoadBalancer(ctx, key, 6443)
	if err != nil || addr != lbAddr || r.balancers[key] != 6443 {
		t.Fatalf("LoadBalancer: %v %v, the cloud has %v", addr, err, r.balancers)
	}

	spec := HostSpec{Name: "ns-1/machine-1", Hostname: "machine-1", InstanceID: "ns-1.machine-1", LoadBalancer: key,
		BootDelay: 3 * time.Second, Data: map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")}}
	in, err := c.StartHost(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.hosts[spec.Name], spec) {
		t.Errorf("the cloud started %+v, not %+v", r.hosts[spec.Name], spec)
	}
	if want := r.instance(spec.Name); in != want {
		t.Errorf("StartHost answered %+v, want %+v", in, want)
	}
	if got, ok, err := c.Host(ctx, spec.Name); err != nil || !ok || got != r.instance(spec.Name) {
		t.Errorf("Host: %+v %v %v", got, ok, err)
	}

	n := host.PodNetwork{PodCIDR: "10.244.1.0/24", Routes: map[string]string{"10.244.2.0/24": "10.213.7.3"}}
	if err := c.SetPodNetwork(ctx, spec.Name, n); err != nil || !reflect.DeepEqual(r.networks[spec.Name], n) {
		t.Errorf("SetPodNetwork: %v, the cloud has %+v", err, r.networks[spec.Name])
	}

	if err := c.StopHost(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Host(ctx, spec.Name); ok || err != nil {
		t.Errorf("Host of a stopped host: %v %v, want none", ok, err)
	}
	if err := c.RemoveLoadBalancer(ctx, key); err != nil || len(r.balancers) != 0 {
		t.Errorf("RemoveLoadBalancer: %v, the cloud has %v", err, r.balancers)
	}
}

// TestClientErrorsKeepDataOut: a failed call says what failed, and the
// bootstrap data it carried appears nowhere in the error.
func TestClientErrorsKeepDataOut(t *testing.T) {
	r := newRecorder()
	r.fail = errors.New("no address left in the lab")
	c := serve(t, r)
	secret := "token: abcdef.0123456789abcdef"
	_, err := c.StartHost(context.Background(), HostSpec{Name: "ns/m", Data: map[string][]byte{"value": []byte(secret)}})
	if err == nil || !strings.Contains(err.Error(), "no address left in the lab") {
		t.Fatalf("StartHost: %v, want the cloud's error", err)
	}
	if strings.Contains(err.Error(), "abcdef") {
		t.Errorf("the error carries the bootstrap data: %v", err)
	}
	if _, ok, err := c.Host(context.Background(), "ns/m"); ok || err != nil {
		t.Errorf("Host: %v %v, want none", ok, err)
	}
}

func TestNewClientWantsABaseURL(t *testing.T) {
	for _, base := range []string{"", "10.213.7.1:8080", "::"} {
		if _, err := NewClient(base); err == nil {
			t.Errorf("NewClient(%q) took it", base)
		}
	}
}
