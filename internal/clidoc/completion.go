package clidoc

import (
	"fmt"
	"sort"
	"strings"
)

// top are the program's commands (no subcommands).
func (d *Doc) top() []Command {
	var out []Command
	for _, c := range d.Commands {
		if len(c.Path) == 1 {
			out = append(out, c)
		}
	}
	return out
}

func flagNames(fs []Flag) string {
	var n []string
	for _, f := range fs {
		n = append(n, "--"+f.Name)
	}
	sort.Strings(n)
	return strings.Join(n, " ")
}

// Bash is the program's bash completion (for
// /usr/share/bash-completion/completions/NAME): commands, subcommands and
// each one's flags; a flag whose placeholder names a file or a folder
// completes paths.
func (d *Doc) Bash() []byte {
	fn := "_" + ident(d.Name)
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s, made from its help (internal/clidoc).\n", d.Name)
	fmt.Fprintf(&b, "%s() {\n\tlocal cur prev cmd=\"\" i\n\tcur=${COMP_WORDS[COMP_CWORD]}\n\tprev=${COMP_WORDS[COMP_CWORD-1]}\n", fn)
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tcase ${COMP_WORDS[i]} in\n\t\t-*) ;;\n\t\t*) cmd=\"${cmd:+$cmd }${COMP_WORDS[i]}\" ;;\n\t\tesac\n\tdone\n")
	b.WriteString("\tcase $prev in\n")
	var files []string
	for _, c := range append([]Command{{Flags: d.Global}}, d.Commands...) {
		for _, f := range c.Flags {
			if pathArg(f.Arg) {
				files = append(files, "--"+f.Name)
			}
		}
	}
	files = uniq(files)
	if len(files) > 0 {
		fmt.Fprintf(&b, "\t%s)\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\t\treturn ;;\n", strings.Join(files, "|"))
	}
	b.WriteString("\tesac\n\tcase $cmd in\n")
	var tops []string
	for _, c := range d.top() {
		tops = append(tops, c.Path[0])
	}
	fmt.Fprintf(&b, "\t\"\")\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", strings.Join(tops, " ")+" "+flagNames(d.Global))
	for _, c := range d.Commands {
		words := flagNames(c.Flags)
		if len(c.Subs) > 0 {
			words = strings.Join(c.Subs, " ")
		}
		fmt.Fprintf(&b, "\t%q)\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", c.Name(), words)
	}
	b.WriteString("\tesac\n}\n")
	fmt.Fprintf(&b, "complete -F %s %s\n", fn, d.Name)
	return []byte(b.String())
}

// Zsh is the program's zsh completion (for
// /usr/share/zsh/vendor-completions/_NAME).
func (d *Doc) Zsh() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s, made from its help (internal/clidoc).\n", d.Name, d.Name)
	fmt.Fprintf(&b, "_%s() {\n\tlocal -a words_ cmds\n\tlocal cmd=\"\" w\n", ident(d.Name))
	b.WriteString("\tfor w in ${words[2,CURRENT-1]}; do\n\t\t[[ $w == -* ]] || cmd=\"${cmd:+$cmd }$w\"\n\tdone\n")
	b.WriteString("\tcase $words[CURRENT-1] in\n")
	var files []string
	for _, c := range append([]Command{{Flags: d.Global}}, d.Commands...) {
		for _, f := range c.Flags {
			if pathArg(f.Arg) {
				files = append(files, "--"+f.Name)
			}
		}
	}
	if files = uniq(files); len(files) > 0 {
		fmt.Fprintf(&b, "\t%s) _files; return ;;\n", strings.Join(files, "|"))
	}
	b.WriteString("\tesac\n\tcase $cmd in\n\t\"\")\n\t\tcmds=(\n")
	for _, c := range d.top() {
		fmt.Fprintf(&b, "\t\t\t%s\n", zquote(c.Path[0]+":"+c.Short))
	}
	b.WriteString("\t\t)\n\t\t_describe command cmds ;;\n")
	for _, c := range d.Commands {
		if len(c.Subs) > 0 {
			fmt.Fprintf(&b, "\t%s)\n\t\tcmds=(%s)\n\t\t_describe subcommand cmds ;;\n", zquote(c.Name()), zsubs(d, c))
			continue
		}
		fmt.Fprintf(&b, "\t%s)\n\t\twords_=(", zquote(c.Name()))
		for _, f := range c.Flags {
			fmt.Fprintf(&b, " %s", zquote("--"+f.Name+":"+oneLine(f.Text)))
		}
		b.WriteString(" )\n\t\t_describe flag words_ ;;\n")
	}
	fmt.Fprintf(&b, "\tesac\n}\n_%s \"$@\"\n", ident(d.Name))
	return []byte(b.String())
}

func zsubs(d *Doc, c Command) string {
	var out []string
	for _, s := range c.Subs {
		short := ""
		for _, sc := range d.Commands {
			if sc.Name() == c.Name()+" "+s {
				short = sc.Short
			}
		}
		out = append(out, zquote(s+":"+short))
	}
	return strings.Join(out, " ")
}

// Fish is the program's fish completion (for
// /usr/share/fish/vendor_completions.d/NAME.fish).
func (d *Doc) Fish() []byte {
	var b strings.Builder
	n := d.Name
	fmt.Fprintf(&b, "# fish completion for %s, made from its help (internal/clidoc).\n", n)
	fmt.Fprintf(&b, "complete -c %s -f\n", n)
	var tops []string
	for _, c := range d.top() {
		tops = append(tops, c.Path[0])
	}
	for _, c := range d.top() {
		fmt.Fprintf(&b, "complete -c %s -n 'not __fish_seen_subcommand_from %s' -a %s -d %s\n", n, strings.Join(tops, " "), fquote(c.Path[0]), fquote(c.Short))
	}
	for _, f := range d.Global {
		fmt.Fprintf(&b, "complete -c %s -n 'not __fish_seen_subcommand_from %s' -l %s%s -d %s\n", n, strings.Join(tops, " "), f.Name, fishArg(f), fquote(oneLine(f.Text)))
	}
	for _, c := range d.Commands {
		cond := "__fish_seen_subcommand_from " + c.Path[0]
		if len(c.Path) > 1 {
			cond += "; and __fish_seen_subcommand_from " + c.Path[1]
		}
		if len(c.Subs) > 0 {
			for _, s := range c.Subs {
				fmt.Fprintf(&b, "complete -c %s -n '%s; and not __fish_seen_subcommand_from %s' -a %s\n", n, cond, strings.Join(c.Subs, " "), fquote(s))
			}
			continue
		}
		for _, f := range c.Flags {
			fmt.Fprintf(&b, "complete -c %s -n '%s' -l %s%s -d %s\n", n, cond, f.Name, fishArg(f), fquote(oneLine(f.Text)))
		}
	}
	return []byte(b.String())
}

func fishArg(f Flag) string {
	switch {
	case f.Arg == "":
		return ""
	case pathArg(f.Arg):
		return " -r -F"
	}
	return " -r"
}

// pathArg reports whether a placeholder names a file or a folder.
func pathArg(arg string) bool {
	a := strings.ToUpper(arg)
	return strings.Contains(a, "FILE") || strings.Contains(a, "DIR") || a == "FOLDER" || a == "PATH"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i]
	}
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

func ident(s string) string { return strings.NewReplacer("-", "_", ".", "_").Replace(s) }

func zquote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func fquote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

func uniq(s []string) []string {
	sort.Strings(s)
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
