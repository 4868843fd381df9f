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

// Package cloud is the simulated cloud's API: what the simulated
// infrastructure provider asks of the Lab (load balancers, hosts, the
// routes of their pod networks), as a cloud provider calls its cloud. The
// provider's controllers hold a Cloud: in the process that owns the Lab it
// is the Lab itself (Local); a provider running elsewhere, as Pods of a
// management cluster, reaches the same Lab over HTTP (Handler, Client).
// Hosts and load balancers are named by the objects they serve, so a
// provider that takes over a cluster finds what another one started.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Cloud is the simulated cloud as its provider sees it.
type Cloud interface {
	// LoadBalancer makes the load balancer named key listen on port, or
	// finds it, and returns its address.
	LoadBalancer(ctx context.Context, key string, port int) (netip.Addr, error)
	// RemoveLoadBalancer stops the load balancer named key, if any.
	RemoveLoadBalancer(ctx context.Context, key string) error
	// StartHost boots a host; a host of that name must not run.
	StartHost(ctx context.Context, spec HostSpec) (Instance, error)
	// Host is the running host of that name; ok is false if none runs.
	Host(ctx context.Context, name string) (in Instance, ok bool, err error)
	// StopHost stops the host of that name, if it runs.
	StopHost(ctx context.Context, name string) error
	// SetPodNetwork gives the host of that name its pod network.
	SetPodNetwork(ctx context.Context, name string, n host.PodNetwork) error
}

// ErrNoHost says that no host of the name asked for runs.
var ErrNoHost = errors.New("no such host")

// HostSpec is what a host boots with: the Lab's own, named by the load
// balancer's key.
type HostSpec = host.HostSpec

// Instance is a running host as the cloud reports it.
type Instance struct {
	Name    string      `json:"name"`
	Address netip.Addr  `json:"address"`
	Status  host.Status `json:"status"`
}

// Local is the Lab as a Cloud, in the process that owns it.
func Local(lab *host.Lab) Cloud { return local{lab: lab} }

type local struct{ lab *host.Lab }

func (l local) LoadBalancer(_ context.Context, key string, port int) (netip.Addr, error) {
	lb, err := l.lab.LoadBalancer(key, port)
	if err != nil {
		return netip.Addr{}, err
	}
	return lb.Addr, nil
}

func (l local) RemoveLoadBalancer(_ context.Context, key string) error {
	l.lab.RemoveLoadBalancer(key)
	return nil
}

func (l local) StartHost(_ context.Context, spec HostSpec) (Instance, error) {
	h, err := l.lab.StartHost(spec)
	if err != nil {
		return Instance{}, err
	}
	return instance(h), nil
}

func (l local) Host(_ context.Context, name string) (Instance, bool, error) {
	h := l.lab.Host(name)
	if h == nil {
		return Instance{}, false, nil
	}
	return instance(h), true, nil
}

func (l local) StopHost(_ context.Context, name string) error {
	if h := l.lab.Host(name); h != nil {
		h.Stop()
	}
	return nil
}

func (l local) SetPodNetwork(_ context.Context, name string, n host.PodNetwork) error {
	h := l.lab.Host(name)
	if h == nil {
		return fmt.Errorf("host %s: %w", name, ErrNoHost)
	}
	return h.SetPodNetwork(n)
}

func instance(h *host.Host) Instance {
	return Instance{Name: h.Name, Address: h.Address, Status: h.Status()}
}
