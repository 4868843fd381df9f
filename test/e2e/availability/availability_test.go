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

package availability

import (
	"testing"
	"time"
)

func TestLongestOutage(t *testing.T) {
	at := func(s ...int) []time.Time {
		var out []time.Time
		for _, x := range s {
			out = append(out, time.Unix(int64(x), 0))
		}
		return out
	}
	for _, c := range []struct {
		failures []time.Time
		want     time.Duration
	}{
		{nil, 0},
		{at(10), time.Second},
		{at(10, 11, 12), 3 * time.Second},
		{at(10, 11, 20, 21, 22, 23), 4 * time.Second},
		{at(10, 12), time.Second}, // 2s apart: two outages
	} {
		if got := longestOutage(c.failures); got != c.want {
			t.Errorf("longestOutage(%v) = %s; want %s", c.failures, got, c.want)
		}
	}
}
