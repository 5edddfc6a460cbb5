package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/governance"
)

// newKeysCmd is `conclave keys`: approvers' ML-DSA-65 key pairs.
func newKeysCmd(a *app) *cobra.Command {
	keys := &cobra.Command{
		Use:   "keys",
		Short: "Make ML-DSA-65 key pairs for approvers (docs/governance.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError(errors.New("a subcommand is required: conclave keys generate NAME --dir DIR"))
		},
	}
	var dir string
	gen := &cobra.Command{
		Use:   "generate NAME --dir DIR",
		Short: "Write DIR/NAME.key (the private seed, mode 0600) and DIR/NAME.pub",
		Long: `generate makes an ML-DSA-65 (FIPS 204) key pair for approver NAME:
DIR/NAME.key holds the 32-byte seed in a PEM block (mode 0600) and
DIR/NAME.pub the packed public key, to list in the --governance file.
It refuses to overwrite either file.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(errors.New("expected one key name: conclave keys generate NAME --dir DIR"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usageError(errors.New("--dir is required"))
			}
			name := args[0]
			// Both files are checked first, so a refusal leaves nothing behind.
			for _, ext := range []string{".key", ".pub"} {
				p := filepath.Join(dir, name+ext)
				if _, err := os.Lstat(p); err == nil {
					return failure(fmt.Errorf("%s exists: refusing to overwrite a key", p))
				} else if !errors.Is(err, os.ErrNotExist) {
					return failure(err)
				}
			}
			keyPath, pubPath, err := governance.WriteKeyPair(dir, name)
			if err != nil {
				return failure(err)
			}
			fmt.Fprintf(a.stdout, "wrote %s (private, mode 0600) and %s\n", keyPath, pubPath)
			return nil
		},
	}
	gen.Flags().StringVar(&dir, "dir", "", "the `directory` to write the key pair into (created if missing, mode 0700)")
	keys.AddCommand(gen)
	return keys
}
