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
	"net/http"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/test/infrastructure/simulated/host"
)

// Port is the port of the simulated cloud's API.
const Port = 8080

// Server serves a Lab's API on an address of the Lab's network, where a
// provider reaches it from this machine or from a host's pods, as it
// reaches the workload clusters' endpoints.
type Server struct {
	// URL is the API's base URL, for NewClient.
	URL string

	srv *http.Server
}

// Serve starts serving lab's API.
func Serve(lab *host.Lab) (*Server, error) {
	ln, err := lab.Listen("cloud-api", Port)
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: Handler(Local(lab)), ReadHeaderTimeout: 10 * time.Second}}
	// Serve ends when Close closes the listener; should it end before,
	// clients see refused connections in their errors.
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops serving and frees the API's address.
func (s *Server) Close() error { return s.srv.Close() }
