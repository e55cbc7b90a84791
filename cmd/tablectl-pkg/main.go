// Command tablectl-pkg builds tablectl's Debian packages from the source
// tree: `go run ./cmd/tablectl-pkg` writes dist/tablectl_VERSION_amd64.deb
// and _arm64.deb (internal/debpkg has what goes in them).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tablectl/tablectl/internal/debpkg"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "tablectl-pkg: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("tablectl-pkg", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tablectl-pkg [flags]\n\nBuilds tablectl's .deb for each --arch into --out.\n\nflags:\n")
		fs.PrintDefaults()
	}
	arches := fs.String("arch", "amd64,arm64", "the `ARCHES` to build, comma-separated (amd64, arm64)")
	out := fs.String("out", "dist", "the `DIR` the packages go to")
	version := fs.String("version", "", "the package's `VERSION` (default 0.1.0+git<revision>)")
	var extra []debpkg.File
	fs.Func("extra", "one more file, `SRC=DST` (repeatable), e.g. the signed manifest at "+debpkg.ManifestPath, func(s string) error {
		src, dst, ok := strings.Cut(s, "=")
		if !ok || src == "" || !strings.HasPrefix(dst, "/") {
			return fmt.Errorf("want SRC=/absolute/destination")
		}
		extra = append(extra, debpkg.File{Src: src, Dst: dst, Mode: 0o644})
		return nil
	})
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := debpkg.FindRoot(wd)
	if err != nil {
		return err
	}
	if *version == "" {
		*version = debpkg.DefaultVersion(root, "0.1.0")
	}
	for _, a := range strings.Split(*arches, ",") {
		p, err := debpkg.Build(context.Background(), debpkg.Options{Root: root, Arch: strings.TrimSpace(a), Version: *version, Out: *out, Extra: extra,
			Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
		if err != nil {
			return err
		}
		fmt.Println(p)
	}
	return nil
}
