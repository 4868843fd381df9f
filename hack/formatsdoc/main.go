// Command formatsdoc writes docs/formats.md from the field rule table
// (internal/fieldrules), so the page can never disagree with admission.
//
//	go run ./hack/formatsdoc docs/formats.md
package main

import (
	"fmt"
	"os"

	"github.com/cabpk-formats/cluster-api-bootstrap-provider-kubeadm/internal/fieldrules"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: formatsdoc OUTPUT.md")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(fieldrules.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
