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

// Package command is what the three mains share: cert-manager's logging
// flags beside each main's own, its defaulted configuration, and how a main
// runs until it is told to stop.
package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/cert-manager/cert-manager/internal/apis/config/shared"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

// Defaulted converts versioned, after the scheme's defaults, into internal:
// the configuration cert-manager's own mains start from.
func Defaulted(scheme *runtime.Scheme, versioned, internal runtime.Object) error {
	scheme.Default(versioned)
	return scheme.Convert(versioned, internal, nil)
}

// LeaderElectionFlags are the election flags the controller and the
// cainjector share.
func LeaderElectionFlags(fs *pflag.FlagSet, le *shared.LeaderElectionConfig) {
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "elect a leader among the replicas")
	fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "namespace of the leader-election lease")
	fs.DurationVar(&le.LeaseDuration, "leader-election-lease-duration", le.LeaseDuration, "leader-election lease duration")
	fs.DurationVar(&le.RenewDeadline, "leader-election-renew-deadline", le.RenewDeadline, "leader-election renew deadline")
	fs.DurationVar(&le.RetryPeriod, "leader-election-retry-period", le.RetryPeriod, "leader-election retry period")
}

// Run parses the command line into fs, with cert-manager's logging flags
// added, and runs run until SIGTERM or SIGINT; an error it returns ends the
// process with status 1.
func Run(name string, fs *pflag.FlagSet, logging *logsapi.LoggingConfiguration, run func(context.Context) error) {
	logf.InitLogs()
	logf.AddFlags(logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	if err := logf.ValidateAndApply(logging); err != nil {
		fmt.Fprintf(os.Stderr, "%s: logging: %v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	ctx = logf.NewContext(ctx, logf.Log, name)
	err := run(ctx)
	stop()
	if err != nil {
		logf.Log.Error(err, "exiting", "component", name)
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.FlushLogs()
}
