package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/shoeread"
)

// maxConfig bounds the controller's config file.
const maxConfig = 256 << 10

// Config is the controller's config file (deploy/tablectl.json is the
// documented example).
type Config struct {
	// TableID names the table in the trail, checkpoints and topics.
	TableID string `json:"table_id"`
	// Profile is a built-in profile's name ("vip") or a profile config
	// object (a built-in and overrides; see coup.ParseProfile).
	Profile json.RawMessage `json:"profile"`
	Table   TableSection    `json:"table"`
	Shoe    ShoeSection     `json:"shoe"`
	Audit   AuditSection    `json:"audit"`
	HTTP    HTTPSection     `json:"http"`
}

// TableSection is the house procedure around the coup.
type TableSection struct {
	Burn             string          `json:"burn"`                // first_card, fixed, none
	BurnCount        int             `json:"burn_count"`          // for fixed
	BurnDoneByButton *bool           `json:"burn_done_by_button"` // default true
	CutCard          string          `json:"cut_card"`            // one_more, finish
	Reveal           string          `json:"reveal"`              // button, immediate
	BettingTime      device.Duration `json:"betting_time"`        // 0: button or game server closes betting
	ResultTime       device.Duration `json:"result_time"`         // default 3s
}

// ShoeSection is the shoe: its protocol and its port.
type ShoeSection struct {
	Driver string        `json:"driver"` // v1, beetek
	Port   device.Config `json:"port"`
}

// AuditSection is the trail and its checkpoint key.
type AuditSection struct {
	Path string `json:"path"`
	// CheckpointKey is the Ed25519 private key (PEM) that signs checkpoints;
	// keep it outside the trail's directory. Empty writes no checkpoints.
	CheckpointKey   string `json:"checkpoint_key"`
	CheckpointEvery int64  `json:"checkpoint_every"`
}

// HTTPSection is the controller's read-only HTTP endpoints.
type HTTPSection struct {
	Listen string `json:"listen"` // e.g. 127.0.0.1:8080; empty serves none
}

// parseConfig reads a config document strictly: unknown fields are errors.
// Relative paths are taken from dir (the config file's folder).
func parseConfig(data []byte, dir string) (Config, coup.TableConfig, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, coup.TableConfig{}, fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return c, coup.TableConfig{}, errors.New("config: text after the JSON document")
	}
	var errs []error
	if c.TableID == "" {
		errs = append(errs, errors.New("table_id is required"))
	}
	p, err := profileOf(c.Profile)
	if err != nil {
		errs = append(errs, fmt.Errorf("profile: %w", err))
	}
	tc := coup.DefaultTableConfig(p)
	if c.Table.Burn != "" {
		tc.Burn = c.Table.Burn
	}
	tc.BurnCount = c.Table.BurnCount
	if c.Table.BurnDoneByButton != nil {
		tc.BurnDoneByButton = *c.Table.BurnDoneByButton
	}
	if c.Table.CutCard != "" {
		tc.CutCard = c.Table.CutCard
	}
	if c.Table.Reveal != "" {
		tc.Reveal = c.Table.Reveal
	}
	tc.BettingTime = time.Duration(c.Table.BettingTime)
	if c.Table.ResultTime != 0 {
		tc.ResultTime = time.Duration(c.Table.ResultTime)
	}
	if err == nil {
		if err := tc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("table: %w", err))
		}
	}
	if c.Shoe.Driver == "" {
		c.Shoe.Driver = "v1"
	}
	if _, err := shoeread.New(c.Shoe.Driver); err != nil {
		errs = append(errs, fmt.Errorf("shoe.driver: %w", err))
	}
	c.Shoe.Port = c.Shoe.Port.WithDefaults()
	if err := c.Shoe.Port.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("shoe.port: %w", err))
	}
	if c.Audit.Path == "" {
		errs = append(errs, errors.New("audit.path is required"))
	}
	c.Audit.Path = under(dir, c.Audit.Path)
	c.Audit.CheckpointKey = under(dir, c.Audit.CheckpointKey)
	if c.Audit.CheckpointEvery < 0 {
		errs = append(errs, errors.New("audit.checkpoint_every must not be negative"))
	}
	if c.Audit.CheckpointEvery == 0 {
		c.Audit.CheckpointEvery = 1000
	}
	return c, tc, errors.Join(errs...)
}

func under(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// profileOf reads the profile field: a name, or a profile config object.
func profileOf(raw json.RawMessage) (coup.Profile, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return coup.Profile{}, errors.New("is required: a built-in name or a profile config")
	}
	if raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return coup.Profile{}, err
		}
		return coup.BuiltinProfile(name)
	}
	return coup.ParseProfile(raw)
}
