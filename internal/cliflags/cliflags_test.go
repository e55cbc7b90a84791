package cliflags

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestPrint(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("db", "", "the trail `file`")
	fs.String("schema", "floor", "the `SCHEMA`")
	fs.Duration("wait", -1, "how `LONG` to wait (-1: for ever)")
	fs.Bool("json", false, "print JSON")
	var b bytes.Buffer
	Print(&b, fs)
	want := "  --db FILE\n    \tthe trail file\n" +
		"  --json\n    \tprint JSON\n" +
		"  --schema SCHEMA\n    \tthe SCHEMA (default \"floor\")\n" +
		"  --wait LONG\n    \thow LONG to wait (-1: for ever)\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	Print(&b, flag.NewFlagSet("none", flag.ContinueOnError))
	if b.String() != "  (none)\n" {
		t.Fatalf("no flags: %q", b.String())
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		args []string
		want string // the usage message; "help" for -h
	}{
		{[]string{"--db", "a"}, ""},
		{[]string{"-h"}, "help"},
		{[]string{"--nope"}, "unknown flag --nope"},
		{[]string{"--wait", "soon"}, `invalid value "soon" for flag --wait: parse error`},
		{[]string{"--db"}, "flag needs an argument: --db"},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.String("db", "", "the trail `file`")
		fs.Duration("wait", time.Second, "how `LONG`")
		var help bytes.Buffer
		fs.Usage = func() { fs.Output().Write([]byte("usage")) }
		var got string
		err := Parse(fs, c.args, &help, func(msg string) error { got = msg; return errors.New(msg) })
		switch {
		case c.want == "help":
			if !errors.Is(err, flag.ErrHelp) || help.String() != "usage" {
				t.Errorf("%v: err %v, help %q", c.args, err, help.String())
			}
		case c.want == "":
			if err != nil {
				t.Errorf("%v: %v", c.args, err)
			}
		case !strings.HasPrefix(got, c.want):
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}
