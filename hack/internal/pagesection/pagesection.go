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

// Package pagesection replaces the generated section of a documentation
// page: the text between two marker lines, which the generators under
// hack/ own and a reader must not edit.
package pagesection

import (
	"bytes"
	"fmt"
	"slices"
)

// Replace puts generated between the begin and end marker lines of page.
func Replace(page []byte, begin, end, generated string) ([]byte, error) {
	before, rest, ok := bytes.Cut(page, []byte(begin))
	if !ok {
		return nil, fmt.Errorf("no marker %q", begin)
	}
	_, after, ok := bytes.Cut(rest, []byte(end))
	if !ok {
		return nil, fmt.Errorf("no marker %q after %q", end, begin)
	}
	return slices.Concat(before, []byte(begin+generated+end), after), nil
}
