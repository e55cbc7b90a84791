package main

import (
	"encoding/json"
	"io"

	"github.com/tablectl/tablectl/device"
)

func init() {
	register(command{
		Name:  "ports",
		Short: "list serial ports with their USB ids, to find the shoe",
		Run:   runPorts,
	})
}

func runPorts(args []string, stdout io.Writer) error {
	fs := newFlagSet("ports")
	asJSON := fs.Bool("json", false, "print the ports as a JSON array")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ports, err := device.ListPorts()
	if err != nil {
		return err
	}
	if *asJSON {
		if ports == nil {
			ports = []device.PortInfo{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ports)
	}
	return device.WritePorts(stdout, ports)
}
