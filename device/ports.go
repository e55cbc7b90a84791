package device

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode"

	"go.bug.st/serial/enumerator"
)

// ErrNoPort reports that no serial port has the configured USB id.
var ErrNoPort = errors.New("no matching serial port")

// ErrAmbiguous reports that several serial ports have the configured USB id.
var ErrAmbiguous = errors.New("several serial ports match")

// PortInfo is one serial port the system has, with its USB identity when it
// is a USB adapter.
type PortInfo struct {
	Name         string `json:"name"` // device path, e.g. /dev/ttyUSB0
	USB          bool   `json:"usb"`
	VID          string `json:"vid,omitempty"` // upper-case hex, e.g. "0403"
	PID          string `json:"pid,omitempty"`
	Serial       string `json:"serial,omitempty"`
	Manufacturer string `json:"manufacturer,omitempty"`
	Product      string `json:"product,omitempty"`
	// Links are the /dev/serial/by-id names that point at the port: the
	// stable names to put in the config.
	Links []string `json:"links,omitempty"`
}

// Lister lists the system's serial ports; ListPorts is the real one.
type Lister func() ([]PortInfo, error)

// byIDDir is where udev keeps stable names for USB serial ports.
const byIDDir = "/dev/serial/by-id"

// ListPorts lists the serial ports the system has (as go.bug.st/serial's
// enumerator sees them: hardware ttys, not pseudo-terminals), sorted by
// name, each with the /dev/serial/by-id links that name it.
func ListPorts() ([]PortInfo, error) {
	return listPorts(enumerator.GetDetailedPortsList, byIDDir)
}

func listPorts(enumerate func(...func(vid, pid string) bool) ([]*enumerator.PortDetails, error), linkDir string) ([]PortInfo, error) {
	details, err := enumerate()
	if err != nil {
		return nil, fmt.Errorf("list serial ports: %w", err)
	}
	links := portLinks(linkDir)
	ports := make([]PortInfo, 0, len(details))
	for _, d := range details {
		// The Linux enumerator returns a blank entry for a tty without a
		// sysfs device; there is nothing to show or open.
		if d == nil || d.Name == "" {
			continue
		}
		p := PortInfo{
			Name:         d.Name,
			USB:          d.IsUSB,
			VID:          strings.ToUpper(d.VID),
			PID:          strings.ToUpper(d.PID),
			Serial:       d.SerialNumber,
			Manufacturer: d.Manufacturer,
			Product:      d.Product,
			Links:        links[d.Name],
		}
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i].Name < ports[j].Name })
	return ports, nil
}

// portLinks maps each device path to the symlinks in dir that resolve to it.
// A missing dir (no USB serial adapter plugged in) is no links.
func portLinks(dir string) map[string][]string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	links := map[string][]string{}
	for _, e := range entries {
		link := filepath.Join(dir, e.Name())
		target, err := filepath.EvalSymlinks(link)
		if err != nil {
			continue // a dangling link: its device is gone
		}
		links[target] = append(links[target], link)
	}
	for _, l := range links {
		sort.Strings(l)
	}
	return links
}

// Resolve picks the one port among ports that has the USB id want: the
// serial number, when given, must match too. None is ErrNoPort and several
// is ErrAmbiguous, each listing the candidates so the operator can fix the
// config.
func Resolve(want USBID, ports []PortInfo) (string, error) {
	vid, pid := normHex(want.VID), normHex(want.PID)
	var sameID, matches []PortInfo
	for _, p := range ports {
		if !p.USB || normHex(p.VID) != vid || normHex(p.PID) != pid {
			continue
		}
		sameID = append(sameID, p)
		if want.Serial == "" || strings.EqualFold(p.Serial, want.Serial) {
			matches = append(matches, p)
		}
	}
	switch {
	case len(matches) == 1:
		return matches[0].Name, nil
	case len(matches) == 0 && len(sameID) > 0:
		return "", fmt.Errorf("%w: usb %s: ports with id %s:%s have other serial numbers: %s",
			ErrNoPort, want, vid, pid, describe(sameID))
	case len(matches) == 0:
		var usb []PortInfo
		for _, p := range ports {
			if p.USB {
				usb = append(usb, p)
			}
		}
		if len(usb) == 0 {
			return "", fmt.Errorf("%w: usb %s: no USB serial port is present", ErrNoPort, want)
		}
		return "", fmt.Errorf("%w: usb %s: USB serial ports present: %s", ErrNoPort, want, describe(usb))
	case want.Serial == "":
		return "", fmt.Errorf("%w: usb %s: %d ports: %s; set usb.serial to choose one",
			ErrAmbiguous, want, len(matches), describe(matches))
	default:
		return "", fmt.Errorf("%w: usb %s: %d ports share that serial number: %s; configure path with a /dev/serial/by-path link instead",
			ErrAmbiguous, want, len(matches), describe(matches))
	}
}

func describe(ports []PortInfo) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprintf("%s (%s:%s serial %q)", p.Name, p.VID, p.PID, p.Serial)
	}
	return strings.Join(s, ", ")
}

// WritePorts writes ports as a table for people: name, USB id, serial
// number, product and by-id links.
func WritePorts(w io.Writer, ports []PortInfo) error {
	if len(ports) == 0 {
		_, err := fmt.Fprintln(w, "no serial ports found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tUSB ID\tSERIAL\tPRODUCT\tLINKS")
	for _, p := range ports {
		id, serialNo, product := "-", "-", "-"
		if p.USB {
			id = p.VID + ":" + p.PID
			if p.Serial != "" {
				serialNo = p.Serial
			}
			if s := strings.TrimSpace(p.Manufacturer + " " + p.Product); s != "" {
				product = s
			}
		}
		links := "-"
		if len(p.Links) > 0 {
			links = strings.Join(p.Links, " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(p.Name), printable(id), printable(serialNo), printable(product), printable(links))
	}
	return tw.Flush()
}

// printable replaces control characters, which a USB device may put in its
// strings, so they cannot break the table or the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
