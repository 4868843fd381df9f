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

package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/testbin"
)

// With Options.KubernetesBinaries, the stack serves the default release's
// kubeadm and kubelet on an address of the Lab, laid out as dl.k8s.io lays
// out releases, each with its SHA-256, as a site's mirror would. This
// provider's manager names it (--node-update-kubernetes-binaries), and nodes
// that move to that release in place fetch them from there: not from their
// image, which is of the release they booted.

// binariesPort is the port of the binaries' server on its Lab address.
const binariesPort = 8080

// serveKubernetesBinaries starts the binaries' server and returns the URL
// nodes fetch from.
func (s *Stack) serveKubernetesBinaries() (string, error) {
	r := testbin.DefaultRelease()
	mux := http.NewServeMux()
	for _, tool := range []string{testbin.Kubeadm, testbin.Kubelet} {
		p, err := r.Path(tool)
		if err != nil {
			return "", err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return "", err
		}
		at := path.Join("/release", r.Kubernetes, "bin", "linux", runtime.GOARCH, tool)
		mux.HandleFunc("GET "+at, func(w http.ResponseWriter, req *http.Request) { http.ServeFile(w, req, p) })
		mux.HandleFunc("GET "+at+".sha256", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, sum) })
	}
	ln, err := s.Lab.Listen("kubernetes-binaries", binariesPort)
	if err != nil {
		return "", err
	}
	s.binaries = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.binaries.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/release", nil
}

// fileSHA256 is a file's SHA-256 in hexadecimal, as dl.k8s.io publishes it.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
