package device

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.bug.st/serial/enumerator"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestResolve(t *testing.T) {
	ftdiA := PortInfo{Name: "/dev/ttyUSB0", USB: true, VID: "0403", PID: "6001", Serial: "A10K2"}
	ftdiB := PortInfo{Name: "/dev/ttyUSB1", USB: true, VID: "0403", PID: "6001", Serial: "B77Q1"}
	clone1 := PortInfo{Name: "/dev/ttyUSB2", USB: true, VID: "1A86", PID: "7523", Serial: ""}
	clone2 := PortInfo{Name: "/dev/ttyUSB3", USB: true, VID: "1A86", PID: "7523", Serial: ""}
	cp210x := PortInfo{Name: "/dev/ttyUSB4", USB: true, VID: "10C4", PID: "EA60", Serial: "0001"}
	onboard := PortInfo{Name: "/dev/ttyS0"}
	tests := []struct {
		name   string
		want   USBID
		ports  []PortInfo
		port   string
		err    error
		errHas []string
	}{
		{"one match", USBID{VID: "0403", PID: "6001"}, []PortInfo{onboard, ftdiA, cp210x}, "/dev/ttyUSB0", nil, nil},
		{"case and 0x prefix", USBID{VID: "0x10c4", PID: "ea60"}, []PortInfo{ftdiA, cp210x}, "/dev/ttyUSB4", nil, nil},
		{"lower-case lister", USBID{VID: "10C4", PID: "EA60"}, []PortInfo{{Name: "/dev/ttyACM0", USB: true, VID: "10c4", PID: "ea60"}}, "/dev/ttyACM0", nil, nil},
		{"serial picks one", USBID{VID: "0403", PID: "6001", Serial: "B77Q1"}, []PortInfo{ftdiA, ftdiB}, "/dev/ttyUSB1", nil, nil},
		{"serial with one match", USBID{VID: "0403", PID: "6001", Serial: "a10k2"}, []PortInfo{ftdiA}, "/dev/ttyUSB0", nil, nil},

		{"none at all", USBID{VID: "0403", PID: "6001"}, nil, "", ErrNoPort, []string{"no USB serial port is present"}},
		{"only non-USB", USBID{VID: "0403", PID: "6001"}, []PortInfo{onboard}, "", ErrNoPort, []string{"no USB serial port is present"}},
		{"other devices", USBID{VID: "0403", PID: "6001"}, []PortInfo{onboard, cp210x}, "", ErrNoPort,
			[]string{"0403:6001", "present: /dev/ttyUSB4 (10C4:EA60 serial \"0001\")"}},
		{"wrong serial", USBID{VID: "0403", PID: "6001", Serial: "ZZZ"}, []PortInfo{ftdiA, ftdiB}, "", ErrNoPort,
			[]string{"other serial numbers", "/dev/ttyUSB0 (0403:6001 serial \"A10K2\")", "/dev/ttyUSB1 (0403:6001 serial \"B77Q1\")"}},
		{"several without serial", USBID{VID: "0403", PID: "6001"}, []PortInfo{ftdiA, cp210x, ftdiB}, "", ErrAmbiguous,
			[]string{"2 ports", "/dev/ttyUSB0", "/dev/ttyUSB1", "set usb.serial"}},
		{"several with the same serial", USBID{VID: "1A86", PID: "7523", Serial: ""}, []PortInfo{clone1, clone2}, "", ErrAmbiguous,
			[]string{"2 ports", "/dev/ttyUSB2", "/dev/ttyUSB3"}},
		{"several sharing a given serial", USBID{VID: "0403", PID: "6001", Serial: "A10K2"},
			[]PortInfo{ftdiA, {Name: "/dev/ttyUSB9", USB: true, VID: "0403", PID: "6001", Serial: "A10K2"}}, "", ErrAmbiguous,
			[]string{"share that serial number", "/dev/ttyUSB0", "/dev/ttyUSB9", "by-path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, err := Resolve(tt.want, tt.ports)
			if tt.err == nil {
				if err != nil || port != tt.port {
					t.Fatalf("Resolve = %q, %v; want %q", port, err, tt.port)
				}
				return
			}
			if !errors.Is(err, tt.err) || port != "" {
				t.Fatalf("Resolve = %q, %v; want error %v", port, err, tt.err)
			}
			for _, s := range tt.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestListPorts(t *testing.T) {
	// A by-id directory with links to stand-in device files.
	dir := t.TempDir()
	dev := filepath.Join(dir, "dev")
	byID := filepath.Join(dir, "by-id")
	for _, d := range []string{dev, byID} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	usb0, usb1 := filepath.Join(dev, "ttyUSB0"), filepath.Join(dev, "ttyUSB1")
	for _, f := range []string{usb0, usb1} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"usb-FTDI_FT232R_A10K2-if00-port0": usb0,
		"usb-FTDI_alias-if00-port0":        usb0,
		"usb-gone-if00-port0":              filepath.Join(dev, "ttyUSB7"), // dangling
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(byID, name)); err != nil {
			t.Fatal(err)
		}
	}
	enumerate := func(...func(vid, pid string) bool) ([]*enumerator.PortDetails, error) {
		return []*enumerator.PortDetails{
			{Name: usb1, IsUSB: true, VID: "10c4", PID: "ea60", SerialNumber: "0001", Product: "CP2102"},
			{}, // the Linux enumerator's blank entry for a tty without a device
			{Name: usb0, IsUSB: true, VID: "0403", PID: "6001", SerialNumber: "A10K2", Manufacturer: "FTDI", Product: "FT232R USB UART"},
			{Name: filepath.Join(dev, "ttyS0")},
		}, nil
	}
	got, err := listPorts(enumerate, byID)
	if err != nil {
		t.Fatal(err)
	}
	want := []PortInfo{
		{Name: filepath.Join(dev, "ttyS0")},
		{Name: usb0, USB: true, VID: "0403", PID: "6001", Serial: "A10K2", Manufacturer: "FTDI", Product: "FT232R USB UART",
			Links: []string{filepath.Join(byID, "usb-FTDI_FT232R_A10K2-if00-port0"), filepath.Join(byID, "usb-FTDI_alias-if00-port0")}},
		{Name: usb1, USB: true, VID: "10C4", PID: "EA60", Serial: "0001", Product: "CP2102"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listPorts:\n got %+v\nwant %+v", got, want)
	}

	broken := errors.New("sysfs unreadable")
	_, err = listPorts(func(...func(vid, pid string) bool) ([]*enumerator.PortDetails, error) { return nil, broken }, byID)
	if !errors.Is(err, broken) {
		t.Errorf("enumeration failure gave %v, want it wrapped", err)
	}
	none, err := listPorts(func(...func(vid, pid string) bool) ([]*enumerator.PortDetails, error) { return nil, nil }, filepath.Join(dir, "missing"))
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("no ports: %#v, %v; want an empty list", none, err)
	}
}

// samplePorts is what the golden files show.
var samplePorts = []PortInfo{
	{Name: "/dev/ttyS0"},
	{Name: "/dev/ttyUSB0", USB: true, VID: "0403", PID: "6001", Serial: "A10K2", Manufacturer: "FTDI", Product: "FT232R USB UART",
		Links: []string{"/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K2-if00-port0"}},
	{Name: "/dev/ttyUSB1", USB: true, VID: "1A86", PID: "7523", Product: "USB2.0-Serial\tclone\x1b[31m"},
}

func TestWritePortsGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WritePorts(&buf, samplePorts); err != nil {
		t.Fatal(err)
	}
	golden(t, "ports.golden", buf.Bytes())

	buf.Reset()
	if err := WritePorts(&buf, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "ports_none.golden", buf.Bytes())

	js, err := json.MarshalIndent(samplePorts, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "ports.json.golden", append(js, '\n'))
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", path, got, want)
	}
}
