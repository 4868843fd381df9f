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

// Package yamlsize bounds what a YAML document a user wrote becomes once its
// aliases are expanded. A few KiB of anchors and aliases can stand for
// gigabytes, and every YAML library that decodes into values (yaml.v2 behind
// sigs.k8s.io/yaml, yaml.v3 behind Butane, the Container Linux Config
// transpiler's fork) expands them in memory; their own alias guards count
// nodes, not bytes. Check reads the document as a node tree, where an alias
// is a pointer and costs nothing, and adds up what each node would be when
// expanded, so a document is refused before any of those libraries sees it.
package yamlsize

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// The bounds of each place the provider reads YAML a user wrote. Each is far
// above what a document without aliases of the largest admitted size expands
// to (at most about twice its length), so only aliases can reach it.
const (
	// ExtraIgnitionConfig bounds a Butane or Container Linux Config document
	// (spec.ignition.*.additionalConfig and the Butane annotation, each at
	// most 32 KiB as written), in admission, the controller and render.
	ExtraIgnitionConfig = 256 << 10
	// RenderInput bounds each manifest and cluster file the render command
	// reads.
	RenderInput = 16 << 20
	// RawDocument bounds the raw document an agent reads (its data secret
	// holds at most 1 MiB).
	RawDocument = 4 << 20
)

// TooLargeError is a document that expands to more than Limit bytes. It
// quotes nothing of the document.
type TooLargeError struct {
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("expands through YAML aliases to more than %d bytes (the limit)", e.Limit)
}

// errCycle is an alias inside the node it names: its expansion never ends.
var errCycle = errors.New("a YAML alias refers to a node that contains it")

// Check returns an error when doc (one YAML document or several) does not
// parse, or when its documents together expand to more than limit bytes. The
// size of a node is what it would take as JSON: a scalar's text and quotes, a
// collection's brackets and separators; an alias counts as the node it names.
func Check(doc []byte, limit int) error {
	_, err := Expanded(doc, limit)
	return err
}

// Expanded is the size doc expands to, as Check measures it; past limit it
// stops and returns a *TooLargeError.
func Expanded(doc []byte, limit int) (int, error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	total := 0
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("not valid YAML: %w", err)
		}
		m := measure{left: limit - total, limit: limit, sizes: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
		size, err := m.node(&n)
		if err != nil {
			return total, err
		}
		total += size
	}
}

// measure adds up one document's nodes. sizes remembers each node an alias
// may name once it is measured, so that an alias costs one lookup however
// often it repeats; open holds the nodes being measured, to catch an alias
// that names one of them.
type measure struct {
	left, limit int
	sizes       map[*yaml.Node]int
	open        map[*yaml.Node]bool
}

func (m *measure) node(n *yaml.Node) (int, error) {
	if size, ok := m.sizes[n]; ok {
		return size, nil
	}
	var size int
	switch n.Kind {
	case yaml.ScalarNode:
		size = len(n.Value) + 2
	case yaml.AliasNode:
		if n.Alias == nil {
			return 0, fmt.Errorf("not valid YAML: an alias names no anchor")
		}
		if m.open[n.Alias] {
			return 0, errCycle
		}
		var err error
		if size, err = m.node(n.Alias); err != nil {
			return 0, err
		}
	default: // documents, sequences, mappings
		m.open[n] = true
		size = 2
		for _, c := range n.Content {
			s, err := m.node(c)
			if err != nil {
				return 0, err
			}
			size += s + 1
			if size > m.left {
				return 0, &TooLargeError{Limit: m.limit}
			}
		}
		delete(m.open, n)
	}
	if size > m.left {
		return 0, &TooLargeError{Limit: m.limit}
	}
	if n.Anchor != "" {
		m.sizes[n] = size
	}
	return size, nil
}
