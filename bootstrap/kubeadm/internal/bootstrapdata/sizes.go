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

package bootstrapdata

import (
	"encoding/base64"
	"fmt"
	"io"
	"text/tabwriter"

	bootstrapv1 "github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/bootstrap/kubeadm/api/v1beta2"
)

// UserDataLimit is a size limit infrastructure puts on the user data it
// passes to machines.
type UserDataLimit struct {
	Name string
	// Short names the limit in tables.
	Short string
	Bytes int
	// Base64 says the limit counts the base64 encoding the API carries.
	Base64 bool
}

// UserDataLimits are the limits users of Cluster API run into most.
var UserDataLimits = []UserDataLimit{
	{Name: "AWS Secrets Manager secret (CAPA's default transport; it chunks larger data)", Short: "Secrets Manager", Bytes: 10240, Base64: true},
	{Name: "AWS EC2 user data", Short: "EC2", Bytes: 16384},
	{Name: "CloudStack user data", Short: "CloudStack", Bytes: 32768, Base64: true},
	{Name: "OpenStack Nova user data", Short: "Nova", Bytes: 65535, Base64: true},
}

// Measured is size as the limit counts it.
func (l UserDataLimit) Measured(size int) int {
	if l.Base64 {
		return base64.StdEncoding.EncodedLen(size)
	}
	return size
}

// Fits says whether data of size bytes is within the limit.
func (l UserDataLimit) Fits(size int) bool { return l.Measured(size) <= l.Bytes }

// Size is the number of bytes the data secret hands on: the value, and the
// further keys of the format (raw: files).
func (d *Data) Size() int {
	n := len(d.Value)
	for _, v := range d.Extra {
		n += len(v)
	}
	return n
}

// MaxSecretSize is the most data a data secret holds: the API server
// refuses a Secret whose keys and values come to more.
const MaxSecretSize = 1 << 20

// secretSize is the size of the data secret's keys and values.
func (d *Data) secretSize() int {
	n := 0
	for k, v := range d.SecretData() {
		n += len(k) + len(v)
	}
	return n
}

// TooLargeError is data that no Secret can hold.
type TooLargeError struct {
	Format bootstrapv1.Format
	Size   int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the %s bootstrap data is %d bytes, more than the %d bytes a Secret can hold: "+
		"move content out of the spec (files from secrets the machine fetches)", e.Format, e.Size, MaxSecretSize)
}

// FitsSecret returns a *TooLargeError when d is more than a data secret
// holds. The controller refuses such data, and render does too.
func (d *Data) FitsSecret() error {
	if size := d.secretSize(); size > MaxSecretSize {
		return &TooLargeError{Format: d.Format, Size: size}
	}
	return nil
}

// WriteSizeReport writes d's size against UserDataLimits; compressed, when
// not nil, is the same data rendered with gzipUserData, for comparison.
func WriteSizeReport(w io.Writer, d, compressed *Data) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "format %s: %d bytes (%d as base64)", d.Format, d.Size(), base64.StdEncoding.EncodedLen(d.Size()))
	if compressed != nil {
		fmt.Fprintf(tw, "; with gzipUserData: %d bytes (%d as base64)", compressed.Size(), base64.StdEncoding.EncodedLen(compressed.Size()))
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "limit\tbytes\tcounts\tthis data")
	if compressed != nil {
		fmt.Fprint(tw, "\twith gzipUserData")
	}
	fmt.Fprintln(tw)
	for _, l := range UserDataLimits {
		counts := "raw bytes"
		if l.Base64 {
			counts = "base64"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s", l.Name, l.Bytes, counts, verdict(l, d.Size()))
		if compressed != nil {
			fmt.Fprintf(tw, "\t%s", verdict(l, compressed.Size()))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func verdict(l UserDataLimit, size int) string {
	if l.Fits(size) {
		return fmt.Sprintf("fits (%d)", l.Measured(size))
	}
	return fmt.Sprintf("OVER (%d)", l.Measured(size))
}
