package main

import "io"

// sub runs the subcommand args[0] of subs as `tablectl CMD ARGS` would,
// returning its error (the registry's usage for a missing or unknown
// one is ErrUsage here, unprinted).
func sub(subs []command, args []string, stdout io.Writer) error {
	for _, c := range subs {
		if len(args) > 0 && c.Name == args[0] {
			return c.Run(args[1:], stdout)
		}
	}
	return errUsage
}

func runAudit(args []string, stdout io.Writer) error    { return sub(auditCommands, args, stdout) }
func runManifest(args []string, stdout io.Writer) error { return sub(manifestCommands, args, stdout) }
