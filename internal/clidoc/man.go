package clidoc

import (
	"fmt"
	"strings"
	"time"
)

// ManPage is one manual page: its file name (tablectl-audit-verify.1) and
// its roff text.
type ManPage struct {
	File string
	Text []byte
}

// ManPages writes a page for the program (NAME.1: its commands and global
// flags) and one for each command (NAME-CMD.1, NAME-CMD-SUB.1), from the
// same text its help prints. about says what the program is (its NAME
// line); version and date go in each page's title line (date: the
// source's, so that a build gives the same bytes twice).
func (d *Doc) ManPages(about, version string, date time.Time) []ManPage {
	day := date.UTC().Format("2006-01-02")
	source := d.Name + " " + version
	var pages []ManPage
	var b strings.Builder
	th(&b, d.Name, day, source)
	b.WriteString(".SH NAME\n" + roff(d.Name) + " \\- " + roff(about) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B " + roff(d.Name) + "\n" + roff("[global flags] <command> [flags]") + "\n")
	b.WriteString(".SH DESCRIPTION\n" + roff(d.Name+" help") + " lists the commands;\n.B " + roff(d.Name+" help") + " \\fIcommand\\fR\nor\n.B " + roff(d.Name) + " \\fIcommand\\fR " + roff("-h") + "\nprints a command's usage, as its page here says it.\n")
	b.WriteString(".SH COMMANDS\n")
	for _, c := range d.Commands {
		b.WriteString(".TP\n.B " + roff(c.Name()) + "\n" + roff(c.Short) + " See\n.BR " + roff(pageName(d.Name, c)) + " (1).\n")
	}
	if len(d.Global) > 0 {
		b.WriteString(".SH GLOBAL FLAGS\nThey go before the command.\n")
		flags(&b, d.Global)
	}
	pages = append(pages, ManPage{File: d.Name + ".1", Text: []byte(b.String())})
	for _, c := range d.Commands {
		var b strings.Builder
		th(&b, pageName(d.Name, c), day, source)
		b.WriteString(".SH NAME\n" + roff(pageName(d.Name, c)) + " \\- " + roff(c.Short) + "\n")
		b.WriteString(".SH SYNOPSIS\n.B " + roff(d.Name+" "+c.Name()) + "\n" + roff(c.Synopsis) + "\n")
		if c.About != "" {
			b.WriteString(".SH DESCRIPTION\n")
			paragraphs(&b, c.About)
		}
		if len(c.Subs) > 0 {
			b.WriteString(".SH SUBCOMMANDS\n")
			for _, s := range c.Subs {
				b.WriteString(".TP\n.B " + roff(s) + "\nSee\n.BR " + roff(d.Name+"-"+strings.Join(c.Path, "-")+"-"+s) + " (1).\n")
			}
		}
		if len(c.Flags) > 0 {
			b.WriteString(".SH OPTIONS\n")
			flags(&b, c.Flags)
		}
		b.WriteString(".SH SEE ALSO\n.BR " + roff(d.Name) + " (1)\n")
		pages = append(pages, ManPage{File: pageName(d.Name, c) + ".1", Text: []byte(b.String())})
	}
	return pages
}

func pageName(prog string, c Command) string { return prog + "-" + strings.Join(c.Path, "-") }

func th(b *strings.Builder, name, day, source string) {
	fmt.Fprintf(b, ".TH %s 1 %s %s \"%s manual\"\n", quote(strings.ToUpper(name)), quote(day), quote(source), roff(strings.SplitN(source, " ", 2)[0]))
}

func flags(b *strings.Builder, fs []Flag) {
	for _, f := range fs {
		b.WriteString(".TP\n\\fB" + roff("--"+f.Name) + "\\fR")
		if f.Arg != "" {
			b.WriteString(" \\fI" + roff(f.Arg) + "\\fR")
		}
		b.WriteString("\n")
		paragraphs(b, f.Text)
	}
}

// paragraphs writes text as filled paragraphs: a blank line starts a new
// one; a line that starts with spaces, or follows one that ends with ':'
// and begins a list, is kept as it is.
func paragraphs(b *strings.Builder, text string) {
	first := true
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if !first {
			b.WriteString(".PP\n")
		}
		first = false
		for _, l := range strings.Split(p, "\n") {
			if strings.HasPrefix(l, " ") {
				b.WriteString(".br\n")
				l = strings.TrimSpace(l)
			}
			if strings.TrimSpace(l) == "" {
				continue
			}
			b.WriteString(roff(strings.TrimSpace(l)) + "\n")
		}
	}
}

// roff escapes text for a roff line: backslashes, hyphens (so they are
// typed as minus signs, as options are), and a leading dot or quote.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func quote(s string) string { return `"` + strings.ReplaceAll(roff(s), `"`, `\(dq`) + `"` }
