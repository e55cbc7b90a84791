package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/controller"
)

func init() {
	register(command{Name: "run", Short: "run the table controller on a configured shoe port", Run: runRun})
}

func runRun(args []string, stdout io.Writer) error {
	fs := newFlagSet("run")
	path := fs.String("config", "", "the controller's config `FILE` (JSON; see deploy/tablectl.json) (required)")
	mf := mqttFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError(fs, "--config is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return controller.RunFile(ctx, *path, config.MQTTOverride{Broker: *mf.broker, Listen: *mf.listen, WSListen: *mf.wsListen}, slog.Default())
}

// mqttFlagSet holds the flags that override the config file's mqtt section.
type mqttFlagSet struct {
	broker, listen, wsListen *string
}

func mqttFlags(fs *flag.FlagSet) mqttFlagSet {
	return mqttFlagSet{
		broker:   fs.String("broker", "", "MQTT broker `URL` (tcp://, ssl://, ws://, wss://); overrides mqtt.broker; none runs the embedded broker"),
		listen:   fs.String("mqtt-listen", "", "the embedded broker's TCP `address` (default "+config.DefaultMQTTListen+")"),
		wsListen: fs.String("mqtt-ws-listen", "", "the embedded broker's WebSocket `address`, or off (default "+config.DefaultMQTTWSListen+")"),
	}
}
