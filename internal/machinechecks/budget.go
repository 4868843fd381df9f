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

package machinechecks

import (
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/util/validation/field"

	upstreambootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// MaxContent is the most content one KubeadmConfig may bring into its
// bootstrap data, in bytes: its files (inline, from Secrets, rendered from
// templates) and passwords from Secrets, counted once as written and once
// decoded, as the machine writes the files. A data Secret holds at most
// 1 MiB, so more could never reach a machine; the bound is what keeps one
// object's cost to the manager and to admission small, whatever it says.
const MaxContent = 1 << 20

// Budget counts one KubeadmConfig's content against MaxContent. Admission,
// the controller and the plan each keep one per object they look at; the
// zero value is an empty budget.
type Budget struct {
	written, decoded int
}

// ContentError is content that cannot go into the bootstrap data: it does
// not decode, or the object's content in all is over MaxContent. The message
// says which and where, never the content, which may be a key.
type ContentError struct {
	Field *field.Path
	// OverBudget says the total went over MaxContent at Field.
	OverBudget bool
	detail     string
}

func (e *ContentError) Error() string { return e.Field.String() + ": " + e.detail }

// FieldError is the error as admission reports it.
func (e *ContentError) FieldError() *field.Error {
	return field.Invalid(e.Field, field.OmitValueType{}, e.detail)
}

func overBudget(at *field.Path, what string) *ContentError {
	return &ContentError{Field: at, OverBudget: true, detail: fmt.Sprintf(
		"the content of this KubeadmConfig's files and passwords %s more than %d bytes in all, the most one bootstrap data secret can carry",
		what, MaxContent)}
}

// Spend books n bytes of content written at at.
func (b *Budget) Spend(at *field.Path, n int) error {
	b.written += n
	if b.written > MaxContent {
		return overBudget(at, "comes to")
	}
	return nil
}

// Decodes checks that content, found at at, decodes under encoding, and
// books what it decodes to. Nothing is kept: the decoded bytes are counted
// as they stream by.
func (b *Budget) Decodes(at *field.Path, encoding upstreambootstrapv1.Encoding, content string) error {
	n, err := decode(encoding, content, MaxContent-b.decoded, io.Discard)
	switch {
	case errors.Is(err, errTooLarge):
		b.decoded = MaxContent + 1
		return overBudget(at, "decodes to")
	case err != nil:
		return &ContentError{Field: at, detail: fmt.Sprintf("with encoding %s, the content %v: the machine cannot write this file", encoding, err)}
	}
	b.decoded += n
	return nil
}

// Over reports whether the budget is spent: further content need not be
// looked at, it would be over too.
func (b *Budget) Over() bool {
	return b.written > MaxContent || b.decoded > MaxContent
}
