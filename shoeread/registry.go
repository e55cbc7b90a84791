package shoeread

import (
	"fmt"
	"sort"
	"strings"
)

// drivers maps each config name to its constructor.
var drivers = map[string]func() Driver{
	"v1":     func() Driver { return NewV1() },
	"beetek": func() Driver { return NewBeetek() },
}

// Names lists the drivers New knows, sorted.
func Names() []string {
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns a fresh driver for the protocol named in the config: "v1"
// (tablectl's own, docs/shoe-protocol.md) or "beetek".
func New(name string) (Driver, error) {
	mk, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("shoe protocol %q: unknown (want one of %s)", name, strings.Join(Names(), ", "))
	}
	return mk(), nil
}
