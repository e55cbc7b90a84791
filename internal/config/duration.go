package config

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a length of time in the config file, written as Go writes
// one ("3s", "1m30s", "24h"). The config's own type, so the schema does not
// borrow the device's (whose Duration also knows "off").
type Duration time.Duration

// String writes the duration as Go does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the duration as Go does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration ("3s", "250ms").
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a duration such as \"3s\" or \"250ms\"", s)
	}
	*d = Duration(v)
	return nil
}
