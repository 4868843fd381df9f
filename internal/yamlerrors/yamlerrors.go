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

// Package yamlerrors takes user content out of YAML decoders' and config
// translators' messages.
// go-yaml quotes the scalar it failed on ("cannot unmarshal !!str `hunter2`
// into int"); in a Butane or Container Linux Config that scalar can be a
// password hash, a key or a file's content, and the message ends up in an
// admission denial or a condition.
package yamlerrors

import (
	"errors"
	"regexp"
)

// quoted matches go-yaml's backquoted values (it shortens long ones with
// "...") and the double-quoted ones of the translators' validation reports
// (file paths, filesystem and unit names); line and column stay.
var quoted = regexp.MustCompile("`[^`]*`|\"[^\"]*\"")

// Redacted is what replaces a quoted value.
const Redacted = "(value redacted)"

// Redact returns msg without the values go-yaml quoted in it.
func Redact(msg string) string {
	return quoted.ReplaceAllString(msg, Redacted)
}

// RedactError returns err with its message redacted; nil stays nil. The
// original error is not wrapped: unwrapping must not give the value back.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(Redact(err.Error()))
}
