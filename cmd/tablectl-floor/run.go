package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/controller"
)

func init() {
	register(command{Name: "run", Short: "run a table controller from its config file: the floor demo's tables (a table box runs tablectl run)", Run: runRun})
}

// runRun is tablectl run without its overrides: the demo's controller
// processes are this binary's, so `go run ./cmd/tablectl-floor demo`
// needs no tablectl beside it.
func runRun(args []string, stdout io.Writer) error {
	fs := newFlagSet("run")
	path := fs.String("config", "", "the controller's config `FILE` (JSON; see deploy/tablectl.json) (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError(fs, "--config is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return controller.RunFile(ctx, *path, config.MQTTOverride{}, slog.Default())
}
