package main

import (
	"context"
	"flag"
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
	mf := mqttFlags(fs)
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
	if err := mf.apply(&c); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.Default().With("table", c.TableID)
	if c.MQTT == nil {
		log.Warn("MQTT is off (mqtt.disabled): nothing is published and no command is taken")
	}
	ctl, err := startController(ctx, c, tc, log, controllerHooks{})
	if err != nil {
		return err
	}
	log.Info("controller running", "shoe_port", c.Shoe.Port.Path, "driver", c.Shoe.Driver, "trail", c.Audit.Path, "http", c.HTTP.Listen,
		"mqtt", ctl.brokerURL(), "topics", ctl.topicPrefix())
	return ctl.run(ctx)
}

// mqttFlagSet holds the flags that override the config file's mqtt section.
type mqttFlagSet struct {
	broker, listen, wsListen *string
}

func mqttFlags(fs *flag.FlagSet) mqttFlagSet {
	return mqttFlagSet{
		broker:   fs.String("broker", "", "MQTT broker `URL` (tcp://, ssl://, ws://, wss://); overrides mqtt.broker; none runs the embedded broker"),
		listen:   fs.String("mqtt-listen", "", "the embedded broker's TCP `address` (default "+defaultMQTTListen+")"),
		wsListen: fs.String("mqtt-ws-listen", "", "the embedded broker's WebSocket `address`, or off (default "+defaultMQTTWSListen+")"),
	}
}

// apply puts the flags given over the config file's mqtt section.
func (f mqttFlagSet) apply(c *Config) error {
	if *f.broker == "" && *f.listen == "" && *f.wsListen == "" {
		return nil
	}
	if c.MQTT == nil {
		// The flags turn MQTT on, as the section would.
		c.MQTT = &MQTTSection{}
		if err := c.MQTT.complete(c.TableID, ""); err != nil {
			return err
		}
	}
	if *f.broker != "" {
		if *f.listen != "" || *f.wsListen != "" {
			return fmt.Errorf("--mqtt-listen and --mqtt-ws-listen are for the embedded broker, not with --broker")
		}
		c.MQTT.Broker, c.MQTT.Listen, c.MQTT.WSListen = *f.broker, "", ""
		return nil
	}
	if c.MQTT.Broker != "" {
		return fmt.Errorf("the config file names a broker (mqtt.broker); --mqtt-listen and --mqtt-ws-listen are for the embedded one")
	}
	if *f.listen != "" {
		c.MQTT.Listen = *f.listen
	}
	if *f.wsListen != "" {
		c.MQTT.WSListen = *f.wsListen
	}
	return nil
}
