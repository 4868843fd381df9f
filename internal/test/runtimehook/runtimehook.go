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

// Package runtimehook calls a Runtime extension's hooks as Cluster API's
// Runtime client does: a JSON POST to the hook's path, over TLS verified
// against the extension's certificate authority.
package runtimehook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// Call sends req to the handler of hook at address (host:port) and decodes
// the answer into resp; an empty handler calls discovery.
func Call(address string, caData []byte, hook runtimecatalog.Hook, handler string, req, resp any) error {
	catalog := runtimecatalog.New()
	if err := runtimehooksv1.AddToCatalog(catalog); err != nil {
		return err
	}
	gvh, err := catalog.GroupVersionHook(hook)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		return fmt.Errorf("no certificate authority to verify %s with", address)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	path := runtimecatalog.GVHToPath(gvh, handler)
	if handler == "" {
		path = strings.TrimSuffix(path, "/")
	}
	r, err := hc.Post("https://"+address+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer func() { _ = r.Body.Close() }()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", path, r.StatusCode, b)
	}
	if err := json.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, b)
	}
	return nil
}
