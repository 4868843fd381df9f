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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// The API's paths. Names are query parameters: they hold slashes
// (namespace/name).
const (
	loadBalancersPath = "/v1/loadbalancers"
	hostsPath         = "/v1/hosts"
	podNetworkPath    = "/v1/hosts/podnetwork"
)

// maxRequestBody bounds what the API reads from a request: bootstrap data
// is at most a few hundred KiB.
const maxRequestBody = 4 << 20

// Handler serves c over HTTP for Client.
func Handler(c Cloud) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT "+loadBalancersPath, func(w http.ResponseWriter, r *http.Request) {
		port, err := strconv.Atoi(r.URL.Query().Get("port"))
		if err != nil {
			writeError(w, http.StatusBadRequest, errors.New("port: not a number"))
			return
		}
		addr, err := c.LoadBalancer(r.Context(), r.URL.Query().Get("key"), port)
		reply(w, addr, err)
	})
	mux.HandleFunc("DELETE "+loadBalancersPath, func(w http.ResponseWriter, r *http.Request) {
		reply(w, nil, c.RemoveLoadBalancer(r.Context(), r.URL.Query().Get("key")))
	})
	mux.HandleFunc("POST "+hostsPath, func(w http.ResponseWriter, r *http.Request) {
		var spec HostSpec
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&spec); err != nil {
			writeError(w, http.StatusBadRequest, errors.New("the host spec is not valid JSON"))
			return
		}
		in, err := c.StartHost(r.Context(), spec)
		reply(w, in, err)
	})
	mux.HandleFunc("GET "+hostsPath, func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		in, ok, err := c.Host(r.Context(), name)
		if err == nil && !ok {
			err = fmt.Errorf("%s: %w", name, ErrNoHost)
		}
		reply(w, in, err)
	})
	mux.HandleFunc("DELETE "+hostsPath, func(w http.ResponseWriter, r *http.Request) {
		reply(w, nil, c.StopHost(r.Context(), r.URL.Query().Get("name")))
	})
	mux.HandleFunc("PUT "+podNetworkPath, func(w http.ResponseWriter, r *http.Request) {
		var n host.PodNetwork
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody)).Decode(&n); err != nil {
			writeError(w, http.StatusBadRequest, errors.New("the pod network is not valid JSON"))
			return
		}
		reply(w, nil, c.SetPodNetwork(r.Context(), r.URL.Query().Get("name"), n))
	})
	return mux
}

// apiError is the body of a failed request.
type apiError struct {
	Error string `json:"error"`
}

func reply(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, ErrNoHost):
		writeError(w, http.StatusNotFound, err)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"the answer could not be encoded"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b) // a client gone away is the client's error
}

// Client is a Cloud served by Handler at a base URL.
type Client struct {
	base *url.URL
	http *http.Client
}

// NewClient returns the Cloud served at base (http://address:port).
func NewClient(base string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the cloud's URL %q is not a base URL", base)
	}
	return &Client{base: u, http: &http.Client{Timeout: 2 * time.Minute}}, nil
}

var _ Cloud = (*Client)(nil)

// LoadBalancer implements Cloud.
func (c *Client) LoadBalancer(ctx context.Context, key string, port int) (netip.Addr, error) {
	var addr netip.Addr
	err := c.do(ctx, http.MethodPut, loadBalancersPath, url.Values{"key": {key}, "port": {strconv.Itoa(port)}}, nil, &addr)
	return addr, err
}

// RemoveLoadBalancer implements Cloud.
func (c *Client) RemoveLoadBalancer(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, loadBalancersPath, url.Values{"key": {key}}, nil, nil)
}

// StartHost implements Cloud.
func (c *Client) StartHost(ctx context.Context, spec HostSpec) (Instance, error) {
	var in Instance
	err := c.do(ctx, http.MethodPost, hostsPath, nil, spec, &in)
	return in, err
}

// Host implements Cloud.
func (c *Client) Host(ctx context.Context, name string) (Instance, bool, error) {
	var in Instance
	err := c.do(ctx, http.MethodGet, hostsPath, url.Values{"name": {name}}, nil, &in)
	if errors.Is(err, ErrNoHost) {
		return Instance{}, false, nil
	}
	return in, err == nil, err
}

// StopHost implements Cloud.
func (c *Client) StopHost(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, hostsPath, url.Values{"name": {name}}, nil, nil)
}

// SetPodNetwork implements Cloud.
func (c *Client) SetPodNetwork(ctx context.Context, name string, n host.PodNetwork) error {
	return c.do(ctx, http.MethodPut, podNetworkPath, url.Values{"name": {name}}, n, nil)
}

// do sends one request and decodes its answer into out. Errors name the
// call, never the body: a host spec carries bootstrap data.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), payload)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("the simulated cloud: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e apiError
		answered := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e) == nil && e.Error != ""
		if resp.StatusCode == http.StatusNotFound && answered {
			return fmt.Errorf("%s: %w", query.Get("name"), ErrNoHost)
		}
		if !answered {
			e.Error = resp.Status
		}
		return fmt.Errorf("the simulated cloud: %s %s: %s", method, path, e.Error)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
