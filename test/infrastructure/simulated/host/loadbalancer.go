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

package host

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// LoadBalancer is a workload cluster's control-plane endpoint: an address
// of the lab on this machine's end of it, where a TCP proxy spreads
// connections over the cluster's control-plane hosts whose API server is
// ready (its /readyz answers 200), as a cloud's load balancer (or Cluster
// API's Docker provider's haproxy, checking /healthz) does for kubeadm's
// controlPlaneEndpoint. A port that merely accepts is not enough: a joining
// control plane's API server listens before its etcd member has caught up,
// and a request it takes then can hang past the client's deadline.
// Control-plane hosts come and go (KubeadmControlPlane scales, rolls out,
// remediates); the endpoint stays. Nothing it forwards leaves the lab.
type LoadBalancer struct {
	Addr netip.Addr
	Port int

	lab      *Lab
	key      string
	listener net.Listener
	stop     chan struct{}

	mu       sync.Mutex
	backends map[string]bool // host name -> healthy
	address  map[string]string
	next     int
}

// healthInterval is how often each backend's port is tried.
const healthInterval = time.Second

// LoadBalancer returns the load balancer of key (a cluster's endpoint),
// creating it on the address reserved for key the first time.
func (l *Lab) LoadBalancer(key string, port int) (*LoadBalancer, error) {
	l.mu.Lock()
	if lb := l.balancers[key]; lb != nil {
		l.mu.Unlock()
		return lb, nil
	}
	l.mu.Unlock()
	ln, addr, err := l.listen(key, port)
	if err != nil {
		return nil, fmt.Errorf("the load balancer of %s: %w", key, err)
	}
	lb := &LoadBalancer{Addr: addr, Port: port, lab: l, key: key, listener: ln, stop: make(chan struct{}),
		backends: map[string]bool{}, address: map[string]string{}}
	l.mu.Lock()
	if existing := l.balancers[key]; existing != nil {
		l.mu.Unlock()
		ln.Close()
		return existing, nil
	}
	l.balancers[key] = lb
	l.mu.Unlock()
	go lb.serve()
	go lb.checkHealth()
	return lb, nil
}

// RemoveLoadBalancer stops the load balancer of key and frees its address.
func (l *Lab) RemoveLoadBalancer(key string) {
	l.mu.Lock()
	lb := l.balancers[key]
	delete(l.balancers, key)
	l.mu.Unlock()
	if lb != nil {
		lb.close()
	}
	l.ReleaseAddress(key)
}

func (lb *LoadBalancer) close() {
	close(lb.stop)
	lb.lab.unlisten(lb.listener, lb.Addr)
}

// add makes a host a backend; remove drops it.
func (lb *LoadBalancer) add(h *Host) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if _, ok := lb.backends[h.Name]; !ok {
		lb.backends[h.Name] = false
	}
	lb.address[h.Name] = net.JoinHostPort(h.Address.String(), strconv.Itoa(lb.Port))
}

func (lb *LoadBalancer) remove(h *Host) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	delete(lb.backends, h.Name)
	delete(lb.address, h.Name)
}

// Backends lists the backends' addresses and whether each answers.
func (lb *LoadBalancer) Backends() map[string]bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	out := map[string]bool{}
	for name, ok := range lb.backends {
		out[lb.address[name]] = ok
	}
	return out
}

func (lb *LoadBalancer) checkHealth() {
	for {
		select {
		case <-lb.stop:
			return
		case <-time.After(healthInterval):
		}
		lb.mu.Lock()
		targets := map[string]string{}
		for name := range lb.backends {
			targets[name] = lb.address[name]
		}
		lb.mu.Unlock()
		for name, addr := range targets {
			ready := apiServerReady(addr)
			lb.mu.Lock()
			if _, still := lb.backends[name]; still {
				lb.backends[name] = ready
			}
			lb.mu.Unlock()
		}
	}
}

// readinessClient asks a backend's API server whether it is ready. The
// check is about the server, not its identity (the serving certificate's
// CA is the workload cluster's), and /readyz is open to anonymous clients.
var readinessClient = &http.Client{
	Timeout:   time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
}

// apiServerReady reports whether the API server at addr answers /readyz
// with 200.
func apiServerReady(addr string) bool {
	resp, err := readinessClient.Get("https://" + addr + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// candidates returns the backends to try, healthy ones first, starting at
// the next in turn.
func (lb *LoadBalancer) candidates() []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var healthy, other []string
	for name, ok := range lb.backends {
		if ok {
			healthy = append(healthy, lb.address[name])
		} else {
			other = append(other, lb.address[name])
		}
	}
	lb.next++
	rotate := func(s []string) []string {
		if len(s) == 0 {
			return s
		}
		i := lb.next % len(s)
		return append(s[i:], s[:i]...)
	}
	return append(rotate(healthy), rotate(other)...)
}

func (lb *LoadBalancer) serve() {
	for {
		c, err := lb.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go lb.forward(c)
	}
}

func (lb *LoadBalancer) forward(client net.Conn) {
	defer client.Close()
	var backend net.Conn
	for _, addr := range lb.candidates() {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			backend = c
			break
		}
	}
	if backend == nil {
		return // no control plane answers: the client sees the connection close
	}
	splice(client, backend)
}
