package clidoc

import (
	"strings"
	"testing"
	"time"
)

// prog is a program's help as a binary of the convention prints it.
var prog = map[string]string{
	"help": `usage: prog [--log-level LEVEL] <command> [flags]

commands:
  audit        verify and export the trail
  run          run the controller

global flags:
  --log-level LEVEL
    	log LEVEL: debug or info (default "info")
`,
	"audit -h": `usage: prog audit <subcommand> [flags]

verify and export the trail

subcommands:
  verify      check a trail

'prog audit <subcommand> -h' prints a subcommand's flags
`,
	"audit verify -h": `usage: prog audit verify [flags]

check a trail

flags:
  --db FILE
    	the trail (required)
  --json
    	print JSON
`,
	"run -h": `usage: prog run --config FILE

Runs the controller. A line with a \backslash
.and a leading dot, and -dashes-.

flags:
  --config FILE
    	the config FILE,
    	two lines
`,
}

func walk(t *testing.T) *Doc {
	t.Helper()
	d, err := Walk("prog", func(args []string) (string, int, error) {
		out, ok := prog[strings.Join(args, " ")]
		if !ok {
			return "", 2, nil
		}
		return out, 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWalk(t *testing.T) {
	d := walk(t)
	var names []string
	for _, c := range d.Commands {
		names = append(names, c.Name()+"="+c.Synopsis)
	}
	if got := strings.Join(names, "|"); got != "audit=<subcommand> [flags]|audit verify=[flags]|run=--config FILE" {
		t.Errorf("commands %q", got)
	}
	if a := d.Commands[0]; strings.Join(a.Subs, ",") != "verify" || len(a.Flags) != 0 {
		t.Errorf("audit %+v", a)
	}
	v := d.Commands[1]
	if len(v.Flags) != 2 || v.Flags[0] != (Flag{Name: "db", Arg: "FILE", Text: "the trail (required)"}) || v.Flags[1] != (Flag{Name: "json", Text: "print JSON"}) {
		t.Errorf("audit verify's flags %+v", v.Flags)
	}
	if r := d.Commands[2]; r.Flags[0].Text != "the config FILE,\ntwo lines" || !strings.HasPrefix(r.About, "Runs the controller.") {
		t.Errorf("run %+v", r)
	}
	if len(d.Global) != 1 || d.Global[0].Name != "log-level" || d.Global[0].Arg != "LEVEL" {
		t.Errorf("global %+v", d.Global)
	}
	// A usage that does not start with its command is refused.
	if _, err := Walk("prog", func(args []string) (string, int, error) {
		if args[0] == "help" {
			return prog["help"], 0, nil
		}
		return "Usage of run:\n", 0, nil
	}); err == nil {
		t.Error("a usage in another format was taken")
	}
}

func TestManPages(t *testing.T) {
	pages := walk(t).ManPages("a program", "1.2", time.Date(2025, 6, 1, 23, 0, 0, 0, time.UTC))
	byName := map[string]string{}
	for _, p := range pages {
		byName[p.File] = string(p.Text)
	}
	for file, wants := range map[string][]string{
		"prog.1":              {`.TH "PROG" 1 "2025\-06\-01" "prog 1.2"`, "prog \\- a program", ".B audit verify\ncheck a trail See\n.BR prog\\-audit\\-verify (1).", `\fB\-\-log\-level\fR \fILEVEL\fR`},
		"prog-audit.1":        {".SH SUBCOMMANDS\n.TP\n.B verify\nSee\n.BR prog\\-audit\\-verify (1)."},
		"prog-audit-verify.1": {"prog\\-audit\\-verify \\- check a trail", ".B prog audit verify\n[flags]", `\fB\-\-db\fR \fIFILE\fR` + "\nthe trail (required)", `\fB\-\-json\fR` + "\nprint JSON"},
		"prog-run.1":          {"A line with a \\ebackslash\n\\&.and a leading dot, and \\-dashes\\-.", "the config FILE,\ntwo lines"},
	} {
		for _, w := range wants {
			if !strings.Contains(byName[file], w) {
				t.Errorf("%s lacks %q:\n%s", file, w, byName[file])
			}
		}
	}
	if len(pages) != 4 {
		t.Errorf("%d pages", len(pages))
	}
}

func TestCompletions(t *testing.T) {
	d := walk(t)
	for name, wants := range map[string][]string{
		"bash": {"complete -F _prog prog", `"")` + "\n\t\tCOMPREPLY=($(compgen -W \"audit run --log-level\"", `"audit")` + "\n\t\tCOMPREPLY=($(compgen -W \"verify\"", `"audit verify")` + "\n\t\tCOMPREPLY=($(compgen -W \"--db --json\"", "--config|--db)\n\t\tCOMPREPLY=($(compgen -f"},
		"zsh":  {"#compdef prog", "'audit:verify and export the trail'", "'verify:check a trail'", "'--db:the trail (required)'", "--config|--db) _files"},
		"fish": {"complete -c prog -n 'not __fish_seen_subcommand_from audit run' -a 'run' -d 'run the controller'", "complete -c prog -n '__fish_seen_subcommand_from audit; and __fish_seen_subcommand_from verify' -l db -r -F -d 'the trail (required)'", "-l json -d 'print JSON'"},
	} {
		got := map[string][]byte{"bash": d.Bash(), "zsh": d.Zsh(), "fish": d.Fish()}[name]
		for _, w := range wants {
			if !strings.Contains(string(got), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, got)
			}
		}
	}
}
