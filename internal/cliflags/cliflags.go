// Package cliflags is the one command-line convention's flag handling,
// shared by every binary (tablectl, tablectl-floor): flags listed as
// --name PLACEHOLDER with their defaults where they say something, -h
// printed to standard output, and the flag package's errors in the
// convention's words.
package cliflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Print lists a flag set's flags as flag.PrintDefaults does, except
// that a flag whose usage text already says its default gets no second
// "(default ...)" and no flag shows a meaningless one ("-1ns").
func Print(w io.Writer, fs *flag.FlagSet) {
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		name, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			// Placeholders in capitals, as the synopses write them.
			line += " " + strings.ToUpper(name)
		}
		line += "\n    \t" + strings.ReplaceAll(text, "\n", "\n    \t")
		if !strings.Contains(text, "(default") && !zeroDefault(f) {
			if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
				line += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
	}
}

// zeroDefault reports whether a flag's default says nothing: empty, false,
// zero, or negative (a "not set" marker the usage text explains).
func zeroDefault(f *flag.Flag) bool {
	switch d := f.DefValue; {
	case d == "", d == "false", d == "0", d == "0s", d == "[]":
		return true
	case strings.HasPrefix(d, "-"):
		return true
	}
	return false
}

// Parse parses args into fs. -h prints the usage to helpOut and returns
// flag.ErrHelp (the caller exits 0); a mistake returns usage(message),
// the binary's usage error, with the flag package's error in the
// convention's words.
func Parse(fs *flag.FlagSet, args []string, helpOut io.Writer, usage func(message string) error) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(helpOut)
			fs.Usage()
			fs.SetOutput(out)
			return flag.ErrHelp
		}
		return usage(Message(err))
	}
	return nil
}

// Message is the flag package's error in the convention's terms: the
// flag as it is written (--name), "unknown flag" for one not defined.
func Message(err error) string {
	s := err.Error()
	if name, ok := strings.CutPrefix(s, "flag provided but not defined: "); ok {
		return "unknown flag --" + strings.TrimLeft(name, "-")
	}
	return flagName.ReplaceAllString(s, "$1 --$2")
}

// flagName is a flag named in the flag package's errors ("for flag -x",
// "for -x", "argument: -x").
var flagName = regexp.MustCompile(`(flag|for|argument:) -{1,2}([A-Za-z0-9][A-Za-z0-9-]*)`)
