package debpkg

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/internal/clidoc"
)

// docs writes, in work, what the package says about itself and returns
// them as package files: a manual page for the program and each command,
// and its bash, zsh and fish completions, all made from the help the
// binary prints (internal/clidoc: the same text as -h); the changelog; the
// copyright file with the licences of the Go modules built in; the lintian
// overrides, each with its reason.
func (o Options) docs(ctx context.Context, work, bin string) ([]File, error) {
	p := o.Package
	host := bin
	if o.Arch != runtime.GOARCH || runtime.GOOS != "linux" {
		// The help is the same on every arch: read it from a build for
		// this machine.
		host = filepath.Join(work, "host-"+p.Name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", host, p.Cmd)
		cmd.Dir = o.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s for this machine, for its help: %w\n%s", p.Cmd, err, out)
		}
	}
	d, err := clidoc.Walk(p.Name, func(args []string) (string, int, error) {
		cmd := exec.CommandContext(ctx, host, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
		var out bytes.Buffer
		cmd.Stdout = &out
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.String(), exit.ExitCode(), nil
		}
		return out.String(), 0, err
	})
	if err != nil {
		return nil, fmt.Errorf("the manual pages: %w", err)
	}
	var fs []File
	add := func(name, dst string, data []byte, compress bool) error {
		src := filepath.Join(work, "doc", name)
		if compress {
			var err error
			if data, err = gzipped(data); err != nil {
				return err
			}
			src += ".gz"
			dst += ".gz"
		}
		if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(src, data, 0o644); err != nil {
			return err
		}
		fs = append(fs, File{Src: src, Dst: dst, Mode: 0o644})
		return nil
	}
	for _, m := range d.ManPages(p.Summary, o.Version, o.Made) {
		if err := add("man/"+m.File, "/usr/share/man/man1/"+m.File, m.Text, true); err != nil {
			return nil, err
		}
	}
	for _, c := range []struct {
		name, dst string
		data      []byte
	}{
		{"bash", "/usr/share/bash-completion/completions/" + p.Name, d.Bash()},
		{"zsh", "/usr/share/zsh/vendor-completions/_" + p.Name, d.Zsh()},
		{"fish", "/usr/share/fish/vendor_completions.d/" + p.Name + ".fish", d.Fish()},
	} {
		if err := add("completion."+c.name, c.dst, c.data, false); err != nil {
			return nil, err
		}
	}
	doc := "/usr/share/doc/" + p.Name + "/"
	if err := add("changelog", doc+"changelog", o.changelog(), true); err != nil {
		return nil, err
	}
	cr, err := o.copyright(ctx)
	if err != nil {
		return nil, err
	}
	if err := add("copyright", doc+"copyright", cr, false); err != nil {
		return nil, err
	}
	if p.Overrides != "" {
		ov, err := os.ReadFile(filepath.Join(o.Root, p.Overrides))
		if err != nil {
			return nil, fmt.Errorf("lintian overrides: %w", err)
		}
		if err := add("lintian-overrides", "/usr/share/lintian/overrides/"+p.Name, ov, false); err != nil {
			return nil, err
		}
	}
	o.Log("%d manual pages, bash, zsh and fish completions, changelog and copyright, dated %s", len(d.Commands)+1, o.Made.Format(time.RFC3339))
	return fs, nil
}

// gzipped is data compressed as gzip -9n does: no name, no time, so the
// same data gives the same bytes.
func gzipped(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// changelog is the package's changelog (a native package's: one entry,
// this version, dated with the source), in Debian's format.
func (o Options) changelog() []byte {
	what := "Built from the source tree"
	if rev, dirty, ok := gitRevision(o.Root); ok {
		what = "Built from commit " + rev[:min(12, len(rev))]
		if dirty {
			what += " with uncommitted changes"
		}
	}
	// Each line within 80 columns (lintian's debian-changelog-line-too-long).
	return fmt.Appendf(nil, "%s (%s) unstable; urgency=medium\n\n  * %s.\n    The project's history is its git log.\n\n -- %s  %s\n",
		o.Package.Name, o.Version, what, o.Maintainer, o.Made.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
}

// copyright is deploy/package/copyright and, after it, each Go module the
// binary is built from with its licence text, from the module cache.
func (o Options) copyright(ctx context.Context) ([]byte, error) {
	head, err := os.ReadFile(filepath.Join(o.Root, "deploy/package/copyright"))
	if err != nil {
		return nil, fmt.Errorf("copyright: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}} {{.Dir}}{{end}}{{end}}", o.Package.Cmd)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+o.Arch, "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("copyright: go list: %w", err)
	}
	mods := map[string][2]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			mods[f[0]] = [2]string{f[1], f[2]}
		}
	}
	paths := make([]string, 0, len(mods))
	for p := range mods {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b := bytes.NewBuffer(bytes.TrimRight(head, "\n"))
	b.WriteString("\n")
	for _, p := range paths {
		m := mods[p]
		lic, name := licence(m[1])
		fmt.Fprintf(b, "\nFiles: (in the binary) %s %s\nCopyright: see the licence\nLicense: %s\n", p, m[0], name)
		for _, l := range strings.Split(strings.TrimRight(lic, "\n"), "\n") {
			if strings.TrimSpace(l) == "" {
				b.WriteString(" .\n")
			} else {
				b.WriteString(" " + strings.TrimRight(l, " \t\r") + "\n")
			}
		}
	}
	return b.Bytes(), nil
}

// licence is a module's licence text (LICENSE, COPYING, ...) and the
// name it is listed under.
func licence(dir string) (text, name string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "the module's licence was not found in the module cache", "unknown"
	}
	var names []string
	for _, e := range entries {
		n := strings.ToUpper(e.Name())
		if !e.IsDir() && (strings.HasPrefix(n, "LICENSE") || strings.HasPrefix(n, "LICENCE") || strings.HasPrefix(n, "COPYING") || n == "UNLICENSE") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "no licence file in the module", "unknown"
	}
	// Debian ships the Apache licence's text: the copyright file names it
	// (lintian: copyright-file-contains-full-apache-2-license).
	if len(names) == 1 {
		if t, err := os.ReadFile(filepath.Join(dir, names[0])); err == nil && isApache2(string(t)) {
			return "On Debian systems the full text of the Apache License 2.0 is in\n/usr/share/common-licenses/Apache-2.0.", "Apache-2.0"
		}
	}
	var b strings.Builder
	for _, n := range names {
		t, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		b.Write(t)
		b.WriteString("\n")
	}
	return b.String(), "other (" + strconv.Quote(strings.Join(names, ", ")) + ", below)"
}

// isApache2 reports whether a licence file is the Apache License 2.0's
// text alone (its terms, and at most the appendix on how to apply it).
func isApache2(t string) bool {
	return strings.Contains(t, "Apache License") && strings.Contains(t, "Version 2.0, January 2004") &&
		strings.Contains(t, "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION")
}

// CommitTime is the time of the source tree's commit (git), the source
// date of a build that was given none; zero when git cannot say.
func CommitTime(root string) time.Time {
	cmd := exec.Command("git", "log", "-1", "--format=%ct")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
