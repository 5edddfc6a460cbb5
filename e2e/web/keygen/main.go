// Command keygen writes approvers' ML-DSA-65 key pairs (NAME.key and
// NAME.pub, governance.WriteKeyPair) for the dashboard's end-to-end test of
// signed approvals: keygen DIR NAME…
package main

import (
	"fmt"
	"os"

	"github.com/conclave-ai/conclave/governance"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: keygen DIR NAME…")
		os.Exit(2)
	}
	for _, name := range os.Args[2:] {
		if _, _, err := governance.WriteKeyPair(os.Args[1], name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
