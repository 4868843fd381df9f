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

// Package requestcount counts the Kubernetes API requests a client or a
// process makes, by verb and resource, for benchmarks of the controller's
// API load.
package requestcount

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Counter counts Kubernetes API requests by verb and resource (the way
// the API server's audit log names them) and the request-body bytes of
// writes. It wraps a client's transport, or stands as a proxy in front of an
// API server for processes the test starts.
type Counter struct {
	mu     sync.Mutex
	counts Counts
}

// Counts is what a Counter has seen.
type Counts struct {
	// Requests by "verb resource[/subresource]", e.g. "create secrets",
	// "patch kubeadmconfigs/status".
	Requests map[string]int
	// BytesWritten is the sum of the request bodies of creates, updates and patches.
	BytesWritten int64
}

// New returns a counter with nothing counted.
func New() *Counter {
	return &Counter{counts: Counts{Requests: map[string]int{}}}
}

func (c *Counter) count(req *http.Request) {
	key := VerbAndResource(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts.Requests[key]++
	if IsWrite(key) && req.ContentLength > 0 {
		c.counts.BytesWritten += req.ContentLength
	}
}

// Snapshot returns a copy of the counts so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Counts{Requests: make(map[string]int, len(c.counts.Requests)), BytesWritten: c.counts.BytesWritten}
	for k, v := range c.counts.Requests {
		out.Requests[k] = v
	}
	return out
}

// Since is what was counted after before was taken.
func (c Counts) Since(before Counts) Counts {
	out := Counts{Requests: map[string]int{}, BytesWritten: c.BytesWritten - before.BytesWritten}
	for k, v := range c.Requests {
		if d := v - before.Requests[k]; d != 0 {
			out.Requests[k] = d
		}
	}
	return out
}

// Total is the number of requests; Writes the number of creates, updates,
// patches and deletes.
func (c Counts) Total() (total, writes int) {
	for k, v := range c.Requests {
		total += v
		if IsWrite(k) {
			writes += v
		}
	}
	return total, writes
}

// IsWrite reports whether a VerbAndResource key writes.
func IsWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	return verb == "create" || verb == "update" || verb == "patch" || verb == "delete"
}

// Wrap counts every request that goes through rt (for rest.Config.Wrap).
func (c *Counter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.count(req)
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// VerbAndResource names a request as get, list, watch, create, update,
// patch or delete on resource[/subresource].
func VerbAndResource(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		parts = parts[min(2, len(parts)):]
	case len(parts) > 0 && parts[0] == "apis":
		parts = parts[min(3, len(parts)):]
	default:
		return strings.ToLower(req.Method) + " " + req.URL.Path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, named := "", false
	if len(parts) > 0 {
		resource = parts[0]
		named = len(parts) > 1
		if len(parts) > 2 {
			resource += "/" + parts[2]
		}
	}
	verb := strings.ToLower(req.Method)
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	}
	return verb + " " + resource
}

// Proxy serves plain HTTP on a loopback port and forwards every request to
// cfg's API server with cfg's credentials, counting it. It returns a
// kubeconfig that reaches the API server through the proxy (no credentials:
// the proxy adds them) and runs until ctx ends.
func (c *Counter) Proxy(ctx context.Context, cfg *rest.Config) ([]byte, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.count(r)
		proxy.ServeHTTP(w, r)
	})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Printf("request-counting proxy: %v\n", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	return clientcmd.Write(*kc)
}
