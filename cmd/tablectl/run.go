package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func init() {
	register(command{name: "run", short: "run the table controller on a configured shoe port", run: runRun})
}

func runRun(args []string, stdout io.Writer) error {
	fs := newFlagSet("run")
	path := fs.String("config", "", "the controller's config file (JSON; see deploy/tablectl.json)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("--config is required")
	}
	data, err := readLimited(*path, maxConfig)
	if err != nil {
		return err
	}
	c, tc, err := parseConfig(data, filepath.Dir(*path))
	if err != nil {
		return fmt.Errorf("%s: %w", *path, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.Default().With("table", c.TableID)
	ctl, err := startController(ctx, c, tc, log, controllerHooks{})
	if err != nil {
		return err
	}
	log.Info("controller running", "shoe_port", c.Shoe.Port.Path, "driver", c.Shoe.Driver, "trail", c.Audit.Path, "http", c.HTTP.Listen)
	return ctl.run(ctx)
}
