package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/internal/floorbench"
)

// floorFlags declares the floor part's flags on fs (each refused at
// parsing when out of range); the function it returns gives the part's
// options once fs is parsed.
func floorFlags(fs *flag.FlagSet) func(quick bool, progress io.Writer) floorbench.Options {
	var fo floorbench.Options
	fs.Func("floor-tables", "floor: the table counts, comma-separated; the last runs the soak and the outage (default 50,100,200,500; --quick 20)", func(s string) error {
		fo.Tables = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a table count", f)
			}
			fo.Tables = append(fo.Tables, n)
		}
		return nil
	})
	duration(fs, &fo.Pace, "floor-pace", "floor: a table's mean time between rows (default 2.5s)")
	duration(fs, &fo.Duration, "floor-duration", "floor: how long each table count but the last deals with the witnesses up (default 3m; --quick 10s)")
	duration(fs, &fo.Soak, "floor-soak", "floor: how long the last table count deals with the witnesses up, its memory judged flat over it (default 30m; --quick as --floor-duration)")
	duration(fs, &fo.Sample, "floor-sample", "floor: how often the witnesses' memory is read (default 1m; --quick 2s)")
	duration(fs, &fo.Outage, "floor-outage", "floor: how long both witnesses are down after the soak, before the catch-up (default 10m; --quick 8s)")
	fs.Func("floor-checkpoint-every", "floor: a table signs a checkpoint every this many rows (default 3)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return errors.New("want a row count of 1 or more")
		}
		fo.CheckpointEvery = n
		return nil
	})
	fs.StringVar(&fo.Postgres, "floor-postgres", "", "floor: the PostgreSQL `URL` the witnesses store into, in a schema of their own dropped after (default $"+floorbench.PostgresEnv+", else "+floorbench.DefaultPostgres+")")
	return func(quick bool, progress io.Writer) floorbench.Options {
		o := fo
		o.Postgres = cmp.Or(o.Postgres, os.Getenv(floorbench.PostgresEnv), floorbench.DefaultPostgres)
		o.Sizes(quick)
		o.Progress = progress
		return o
	}
}

// duration declares a flag of a positive duration.
func duration(fs *flag.FlagSet, p *time.Duration, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return errors.New("want a positive duration")
		}
		*p = d
		return nil
	})
}
