// Command tablectl-pkg builds tablectl's Debian packages from the source
// tree: `go run ./cmd/tablectl-pkg --manifest-key FILE` writes
// dist/tablectl_VERSION_amd64.deb and _arm64.deb, each with the
// self-authentication manifest of its own binary and the example config,
// signed with the build key FILE, and the floor's package beside them,
// dist/tablectl-floor_VERSION_ARCH.deb (--package chooses; internal/debpkg
// has what goes in them).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
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
		fmt.Fprintf(fs.Output(), `usage: tablectl-pkg --manifest-key FILE [flags]

Builds each --package's .deb for each --arch into --out: tablectl, the
table box's, and tablectl-floor, the floor's (the witness and its unit;
never on a table box). Each is dated with
SOURCE_DATE_EPOCH, else the commit's time: the same commit built twice
gives the same bytes. The table's package carries the
self-authentication manifest of its own binary and the example config (and
each --manifest-config, a table's own config), signed with the build key,
and the key's public half, at %s and
%s. The build key stays with the builder: only its public half
goes in the package (docs/operations.md, "Self-authentication").

flags:
`, debpkg.ManifestPath, debpkg.ManifestPubPath)
		fs.PrintDefaults()
	}
	arches := fs.String("arch", "amd64,arm64", "the `ARCHES` to build, comma-separated (amd64, arm64)")
	names := fs.String("package", debpkg.Name+","+debpkg.FloorName, "the `PACKAGES` to build, comma-separated ("+debpkg.Name+", "+debpkg.FloorName+")")
	out := fs.String("out", "dist", "the `DIR` the packages go to")
	version := fs.String("version", "", "the package's `VERSION` (default 0.1.0+git<revision>)")
	keyFile := fs.String("manifest-key", "", "the build key `FILE` (Ed25519 PEM, tablectl audit keygen) that signs the manifest")
	maintainer := fs.String("maintainer", debpkg.DefaultMaintainer, "the package's Maintainer: `\"NAME <ADDRESS>\"`")
	unsigned := fs.Bool("unsigned", false, "build without a manifest: the installed table refuses to deal (deploy/tablectl.json sets self_check.require)")
	var configs []string
	fs.Func("manifest-config", "one more config `FILE` the manifest covers (repeatable): a table's own config, installed as "+debpkg.ConfigPath, func(s string) error {
		if _, err := os.Stat(s); err != nil {
			return err
		}
		configs = append(configs, s)
		return nil
	})
	var extra []debpkg.File
	fs.Func("extra", "one more file in each package, `SRC=DST` (repeatable)", func(s string) error {
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
	pkgs, table, err := packages(*names)
	if err != nil {
		return err
	}
	o := debpkg.Options{Out: *out, Extra: extra, Unsigned: *unsigned, Configs: configs, Maintainer: *maintainer,
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	switch {
	case *keyFile != "" && *unsigned:
		return errors.New("--manifest-key and --unsigned: give one")
	case *unsigned && len(configs) > 0:
		return errors.New("--manifest-config needs --manifest-key")
	case *keyFile != "":
		key, err := audit.LoadPrivateKey(*keyFile)
		if err != nil {
			return fmt.Errorf("--manifest-key: %w", err)
		}
		o.ManifestKey = key
	case !table:
		// The floor's package carries no manifest: no key needed.
	case *unsigned:
		fmt.Fprintf(os.Stderr, "tablectl-pkg: warning: --unsigned: no manifest in the package; with self_check.require (set in deploy/tablectl.json) the table records self_check_failed and refuses to deal until a signed manifest is at %s\n", debpkg.ManifestPath)
	default:
		return debpkg.ErrNoManifestKey
	}
	// A reproducible build's time (reproducible-builds.org): the same
	// tree and key then give the same package, byte for byte (Ed25519 is
	// deterministic). Without it, the commit's time (debpkg.Build).
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		sec, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", e, err)
		}
		o.Made = time.Unix(sec, 0)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if o.Root, err = debpkg.FindRoot(wd); err != nil {
		return err
	}
	if *version == "" {
		*version = debpkg.DefaultVersion(o.Root, "0.1.0")
	}
	o.Version = *version
	for _, pkg := range pkgs {
		o.Package = pkg
		for _, a := range strings.Split(*arches, ",") {
			o.Arch = strings.TrimSpace(a)
			p, err := debpkg.Build(context.Background(), o)
			if err != nil {
				return err
			}
			fmt.Println(p)
		}
	}
	return nil
}

// packages are the packages of --package, in its order; table says
// whether the table's is one (it needs the build key).
func packages(names string) (pkgs []debpkg.Package, table bool, err error) {
	for _, n := range strings.Split(names, ",") {
		p, ok := debpkg.Packages[strings.TrimSpace(n)]
		if !ok {
			return nil, false, fmt.Errorf("--package %q: want %s or %s", n, debpkg.Name, debpkg.FloorName)
		}
		pkgs = append(pkgs, p)
		table = table || p.Manifest
	}
	return pkgs, table, nil
}
