// Package clidoc reads a command-line program's help, as its users see it
// (`NAME help`, `NAME CMD -h`), into a Doc, and writes from that one text
// the manual pages and the bash, zsh and fish completions its package
// ships. It holds the convention every binary of the module keeps (see
// internal/clitest), so any binary that keeps it is documented the same
// way: the package builder runs the binary built for the build machine.
//
// The help it reads: `NAME help` lists "commands:" (two spaces, the name,
// spaces, what it does) and "global flags:"; `NAME CMD -h` starts with
// "usage: NAME CMD SYNOPSIS", then what the command does, then "flags:"
// (each "  --flag PLACEHOLDER" and its text on lines starting with a tab)
// or "subcommands:" (listed as commands are).
package clidoc

import (
	"bufio"
	"fmt"
	"strings"
)

// Run runs the program with args and returns what it wrote on stdout and
// its exit code.
type Run func(args []string) (stdout string, code int, err error)

// Doc is a program's help.
type Doc struct {
	Name string
	// Usage is `NAME help`.
	Usage    string
	Global   []Flag
	Commands []Command
}

// Command is one command or subcommand ("audit verify").
type Command struct {
	Path     []string
	Short    string
	Usage    string // its -h, whole
	Synopsis string // after "usage: NAME PATH"
	About    string
	Flags    []Flag
	// Subs are the subcommands' names, for a command that has them.
	Subs []string
}

// Name is the command's words joined by spaces ("audit verify").
func (c Command) Name() string { return strings.Join(c.Path, " ") }

// Flag is one flag in a usage.
type Flag struct {
	Name string // without the dashes
	Arg  string // the placeholder; empty for a switch
	Text string
}

// Walk reads the whole help of the program name through run: the command
// list, then each command's usage and each subcommand's.
func Walk(name string, run Run) (*Doc, error) {
	top, err := help(run, []string{"help"})
	if err != nil {
		return nil, err
	}
	d := &Doc{Name: name, Usage: top}
	d.Global = parseFlags(section(top, "global flags:"))
	for _, e := range listed(section(top, "commands:")) {
		c, err := command(name, run, []string{e[0]}, e[1])
		if err != nil {
			return nil, err
		}
		parent := len(d.Commands)
		d.Commands = append(d.Commands, c)
		for _, s := range listed(section(c.Usage, "subcommands:")) {
			sc, err := command(name, run, []string{e[0], s[0]}, s[1])
			if err != nil {
				return nil, err
			}
			d.Commands[parent].Subs = append(d.Commands[parent].Subs, s[0])
			d.Commands = append(d.Commands, sc)
		}
	}
	if len(d.Commands) == 0 {
		return nil, fmt.Errorf("%s help lists no commands", name)
	}
	return d, nil
}

func help(run Run, args []string) (string, error) {
	out, code, err := run(args)
	if err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	if code != 0 {
		return "", fmt.Errorf("%s: exit %d", strings.Join(args, " "), code)
	}
	return out, nil
}

func command(name string, run Run, path []string, short string) (Command, error) {
	u, err := help(run, append(append([]string{}, path...), "-h"))
	if err != nil {
		return Command{}, err
	}
	c := Command{Path: path, Short: short, Usage: u}
	first, rest, _ := strings.Cut(u, "\n")
	head := "usage: " + name + " " + c.Name()
	if !strings.HasPrefix(first, head) {
		return c, fmt.Errorf("%s -h: the usage starts %q, not %q", c.Name(), first, head)
	}
	c.Synopsis = strings.TrimSpace(strings.TrimPrefix(first, head))
	// What it does: up to the first section.
	var about []string
	for _, l := range strings.Split(rest, "\n") {
		if l == "flags:" || l == "subcommands:" {
			break
		}
		about = append(about, l)
	}
	c.About = strings.TrimSpace(strings.Join(about, "\n"))
	c.Flags = parseFlags(section(u, "flags:"))
	return c, nil
}

// section is the lines after the line title, up to a blank line.
func section(text, title string) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == title:
			in = true
		case in && strings.TrimSpace(l) == "":
			return out
		case in:
			out = append(out, l)
		}
	}
	return out
}

// listed reads "  name   what it does" lines.
func listed(lines []string) [][2]string {
	var out [][2]string
	for _, l := range lines {
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "   ") {
			continue
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		out = append(out, [2]string{f[0], strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), f[0]))})
	}
	return out
}

// parseFlags reads a flags section: "  --name ARG" then its text on lines
// that start with spaces and a tab.
func parseFlags(lines []string) []Flag {
	var out []Flag
	for _, l := range lines {
		t := strings.TrimLeft(l, " ")
		switch {
		case strings.HasPrefix(t, "\t") && len(out) > 0:
			f := &out[len(out)-1]
			f.Text = strings.TrimSpace(f.Text + "\n" + strings.TrimPrefix(t, "\t"))
		case strings.HasPrefix(t, "-"):
			name, arg, _ := strings.Cut(t, " ")
			out = append(out, Flag{Name: strings.TrimLeft(name, "-"), Arg: strings.TrimSpace(arg)})
		}
	}
	return out
}
