package debpkg

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/selfcheck"
	"github.com/tablectl/tablectl/internal/testenv"
)

// buildKey is a build key made for the test, as tablectl audit keygen
// makes one.
func buildKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// checkManifest checks the package extracted at x as the installed
// controller would: the manifest at its place verifies with the public key
// at its place and covers the package's binary and config. It returns the
// manifest.
func checkManifest(t *testing.T, x string, key ed25519.PrivateKey, configs int) selfcheck.Manifest {
	t.Helper()
	pub, err := audit.LoadPublicKey(filepath.Join(x, ManifestPubPath))
	if err != nil {
		t.Fatalf("the package's public key: %v", err)
	}
	if !pub.Equal(key.Public()) {
		t.Fatal("the package's public key is not the build key's")
	}
	data, err := os.ReadFile(filepath.Join(x, ManifestPath))
	if err != nil {
		t.Fatal(err)
	}
	m, err := selfcheck.Parse(data, pub)
	if err != nil {
		t.Fatal(err)
	}
	res := selfcheck.Checker{Manifest: filepath.Join(x, ManifestPath), PublicKey: filepath.Join(x, ManifestPubPath), Require: true,
		Executable: filepath.Join(x, BinPath), Config: filepath.Join(x, ConfigPath)}.Check()
	if res.Result != coup.SelfCheckOK {
		t.Errorf("self-check of the package's own files: %s %s", res.Result, res.Detail)
	}
	roles := map[string]int{}
	for _, f := range m.Files {
		roles[f.Role]++
		if want := map[string]string{selfcheck.RoleExecutable: BinPath, selfcheck.RoleConfig: ConfigPath}[f.Role]; f.Path != want {
			t.Errorf("manifest entry %+v: want path %s", f, want)
		}
	}
	if roles[selfcheck.RoleExecutable] != 1 || roles[selfcheck.RoleConfig] != configs || len(m.Files) != 1+configs {
		t.Errorf("manifest files %+v", m.Files)
	}
	// The build key's private half is nowhere in the package.
	// (Its seed, its PKCS #8 form, or that form's PEM text.)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	b64 := base64.StdEncoding.EncodeToString(der)[:40]
	filepath.WalkDir(x, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, key.Seed()) || bytes.Contains(b, der) || bytes.Contains(b, []byte(b64)) {
			t.Errorf("%s holds a private key", p)
		}
		return nil
	})
	return m
}

func root(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	r, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestContentsExist: every file the package lists is in the tree, and the
// unit names the binary where the package puts it.
func TestContentsExist(t *testing.T) {
	r := root(t)
	dsts := map[string]bool{}
	for _, f := range Contents(r, "/bin/true") {
		if dsts[f.Dst] {
			t.Errorf("%s twice", f.Dst)
		}
		dsts[f.Dst] = true
		if f.Dir {
			continue
		}
		if _, err := os.Stat(f.Src); err != nil {
			t.Errorf("%s: %v", f.Dst, err)
		}
	}
	for _, want := range []string{"/usr/bin/tablectl", "/lib/systemd/system/tablectl.service", "/lib/udev/rules.d/99-tablectl-shoe.rules",
		"/etc/tablectl/tablectl.json", "/usr/share/tablectl/mosquitto/mosquitto.conf", "/usr/share/doc/tablectl/README.md",
		"/usr/share/doc/tablectl/docs/operations.md", "/usr/share/doc/tablectl/docs/configuration.md"} {
		if !dsts[want] {
			t.Errorf("the package lacks %s", want)
		}
	}
	unit, err := os.ReadFile(filepath.Join(r, "deploy/tablectl.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/bin/tablectl ") || !strings.Contains(string(unit), "Documentation=file:///usr/share/doc/tablectl/README.md") {
		t.Error("the unit's ExecStart or Documentation is not where the package installs them")
	}
	for _, p := range Packages {
		for k, s := range p.Scripts {
			if fi, err := os.Stat(filepath.Join(r, s)); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s %s: %v (mode %v)", p.Name, k, err, fi)
			}
		}
	}
}

// TestFloorContentsExist: every file the floor's package lists is in the
// tree, it installs docs/floor.md's folders, its unit runs the binary
// where the package puts it with the flags' file it installs, and it
// carries nothing of the table's package.
func TestFloorContentsExist(t *testing.T) {
	r := root(t)
	dsts := map[string]File{}
	for _, f := range FloorContents(r, "/bin/true") {
		if _, dup := dsts[f.Dst]; dup {
			t.Errorf("%s twice", f.Dst)
		}
		dsts[f.Dst] = f
		if !f.Dir {
			if _, err := os.Stat(f.Src); err != nil {
				t.Errorf("%s: %v", f.Dst, err)
			}
		}
	}
	for dst, want := range map[string]string{
		"/usr/bin/tablectl-floor":                            "0755 root:root",
		"/lib/systemd/system/tablectl-floor-witness.service": "0644 root:root",
		"/etc/tablectl/floor-witness.env":                    "0640 root:tablectl-floor conffile",
		"/etc/tablectl":                                      "0750 root:tablectl-floor dir",
		"/etc/tablectl/keys":                                 "0750 root:tablectl-floor dir",
		"/etc/tablectl/floor-logins":                         "0700 root:root dir",
		"/var/lib/tablectl-floor":                            "0750 tablectl-floor:tablectl-floor dir",
		"/usr/share/doc/tablectl-floor/floor.md":             "0644 root:root",
	} {
		f, ok := dsts[dst]
		got := fmt.Sprintf("%04o %s:%s", f.Mode, or(f.Owner, "root"), or(f.Group, "root"))
		if f.Config {
			got += " conffile"
		}
		if f.Dir {
			got += " dir"
		}
		if !ok || got != want {
			t.Errorf("%s: %v %q, want %q", dst, ok, got, want)
		}
	}
	// Nothing of the table's: its binary, unit, config, udev rule.
	for _, f := range Contents(r, "/bin/true") {
		if g, ok := dsts[f.Dst]; ok && !g.Dir {
			t.Errorf("the floor's package carries the table's %s", f.Dst)
		}
	}
	unit, err := os.ReadFile(filepath.Join(r, "deploy/tablectl-floor-witness.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=" + FloorBinPath + " witness ", "EnvironmentFile=" + FloorEnvPath, "User=" + FloorUser,
		"Documentation=file:///usr/share/doc/tablectl-floor/floor.md"} {
		if !strings.Contains(string(unit), "\n"+want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	// Every ${VAR} the unit's ExecStart reads, the flags' file sets.
	env, err := os.ReadFile(filepath.Join(r, "deploy/tablectl-floor-witness.env"))
	if err != nil {
		t.Fatal(err)
	}
	exec := regexp.MustCompile(`(?m)^ExecStart=.*$`).FindString(string(unit))
	for _, m := range regexp.MustCompile(`\$\{?([A-Z_]+)\}?`).FindAllStringSubmatch(exec, -1) {
		if !regexp.MustCompile(`(?m)^` + m[1] + `=\S`).Match(env) {
			t.Errorf("the unit reads %s; the flags' file does not set it", m[1])
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Arch: "mips", Version: "1.0", Unsigned: true}, {Arch: "amd64", Version: "v1.0", Unsigned: true},
		{Arch: "amd64", Unsigned: true}, {Arch: "amd64", Version: "1.0", ManifestKey: ed25519.PrivateKey{1, 2, 3}}} {
		if _, err := Build(context.Background(), o); err == nil {
			t.Errorf("%+v built", o)
		}
	}
	// Neither a key nor Unsigned: refused before anything is built.
	if _, err := Build(context.Background(), Options{Arch: "amd64", Version: "1.0", Out: t.TempDir()}); !errors.Is(err, ErrNoManifestKey) {
		t.Errorf("no key: %v", err)
	}
}

// TestBuildDeb builds the amd64 package, signed with a build key, with an
// extra file, and reads it back with dpkg-deb: every listed file at its
// place with its owner and mode, the conffile, the scripts, the binary's
// stamped version, the manifest that verifies with the shipped public key
// and covers the shipped binary and config, and no private key.
func TestBuildDeb(t *testing.T) {
	testenv.Long(t, "building the .deb (a full go build)")
	dpkg := testenv.Command(t, "dpkg-deb", "dpkg")
	r := root(t)
	extra := filepath.Join(t.TempDir(), "extra.txt")
	if err := os.WriteFile(extra, []byte("extra\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	key := buildKey(t)
	// A table's own config, signed too.
	table := filepath.Join(t.TempDir(), "bac-08.json")
	doc, err := os.ReadFile(filepath.Join(r, "deploy/tablectl.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(table, bytes.ReplaceAll(doc, []byte("BAC-07"), []byte("BAC-08")), 0o644); err != nil {
		t.Fatal(err)
	}
	made := time.Date(2025, 6, 1, 6, 30, 0, 0, time.UTC)
	deb, err := Build(context.Background(), Options{Root: r, Arch: "amd64", Version: "9.8.7", Out: out, ManifestKey: key, Configs: []string{table},
		Extra: []File{{Src: extra, Dst: "/usr/share/doc/tablectl/extra.txt", Mode: 0o644}}, Log: t.Logf, Made: made})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(deb) != "tablectl_9.8.7_amd64.deb" {
		t.Errorf("package %s", deb)
	}
	list, err := exec.Command(dpkg, "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, list)
	}
	for _, want := range []string{
		"drwxr-x--- root/tablectl 0 2025-06-01 06:30 ./etc/tablectl/",
		"-rw-r----- root/tablectl", "./etc/tablectl/tablectl.json",
		"drwxr-x--- tablectl/tablectl 0 2025-06-01 06:30 ./var/lib/tablectl/",
		"./usr/share/doc/tablectl/copyright", "./usr/share/doc/tablectl/changelog.gz",
		"./usr/share/man/man1/tablectl.1.gz", "./usr/share/man/man1/tablectl-audit-verify.1.gz", "./usr/share/man/man1/tablectl-suspend.1.gz",
		"./usr/share/bash-completion/completions/tablectl", "./usr/share/zsh/vendor-completions/_tablectl",
		"./usr/share/fish/vendor_completions.d/tablectl.fish", "./usr/share/lintian/overrides/tablectl",
		"-rwxr-xr-x root/root", "./usr/bin/tablectl",
		"-rw-r--r-- root/root", "." + ManifestPath, "." + ManifestPubPath,
		"./usr/share/doc/tablectl/extra.txt",
	} {
		if !strings.Contains(strings.Join(strings.Fields(string(list)), " "), want) {
			t.Errorf("dpkg-deb -c lacks %q:\n%s", want, list)
		}
	}
	for _, f := range Contents(r, "") {
		if !strings.Contains(string(list), "."+f.Dst) {
			t.Errorf("package lacks %s", f.Dst)
		}
	}
	// The floor is not on the table box (issue 30): not its binary, unit
	// or anything else of the floor's package.
	for _, f := range FloorContents(r, "") {
		if !f.Dir && strings.Contains(string(list), "."+f.Dst) {
			t.Errorf("the table's package carries the floor's %s", f.Dst)
		}
	}
	info, err := exec.Command(dpkg, "-I", deb).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(list), " 1970-01-01 ") {
		t.Errorf("a file dated 1970, not the source's date:\n%s", list)
	}
	for _, want := range []string{"Package: tablectl", "Version: 9.8.7", "Architecture: amd64", "Depends: adduser", "preinst", "postinst", "prerm", "postrm",
		"Maintainer: " + DefaultMaintainer} {
		if !strings.Contains(string(info), want) {
			t.Errorf("dpkg-deb -I lacks %q:\n%s", want, info)
		}
	}
	conf, err := exec.Command(dpkg, "-I", deb, "conffiles").CombinedOutput()
	if err != nil || strings.TrimSpace(string(conf)) != "/etc/tablectl/tablectl.json" {
		t.Errorf("conffiles %q: %v", conf, err)
	}
	x := t.TempDir()
	if out, err := exec.Command(dpkg, "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	v, err := exec.Command(filepath.Join(x, "usr/bin/tablectl"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(v), "tablectl 9.8.7 ") {
		t.Errorf("tablectl version: %q %v", v, err)
	}
	if _, _, ok := gitRevision(r); ok && !strings.Contains(string(v), " revision ") {
		t.Errorf("no revision in %q", v)
	}
	checkManifest(t, x, key, 2)
	// The binary is position-independent (lintian's hardening-no-pie).
	if f, err := elf.Open(filepath.Join(x, BinPath)); err != nil || f.Type != elf.ET_DYN {
		t.Errorf("the binary is not PIE: %v %v", f, err)
	}
	// The manual pages and completions come from the binary's own help.
	for path, want := range map[string]string{
		"usr/share/bash-completion/completions/tablectl":    "complete -F _tablectl tablectl",
		"usr/share/zsh/vendor-completions/_tablectl":        "#compdef tablectl",
		"usr/share/fish/vendor_completions.d/tablectl.fish": "complete -c tablectl -n '__fish_seen_subcommand_from audit; and __fish_seen_subcommand_from verify' -l db -r -F",
		"usr/share/lintian/overrides/tablectl":              "tablectl: non-standard-dir-perm",
		"usr/share/doc/tablectl/copyright":                  "Files: (in the binary) github.com/mattn/go-sqlite3",
	} {
		b, err := os.ReadFile(filepath.Join(x, path))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q: %v", path, want, err)
		}
	}
	// The installed binary's own check agrees (tablectl manifest check),
	// with the example config and with the table's; not with another.
	other := filepath.Join(t.TempDir(), "bac-09.json")
	os.WriteFile(other, bytes.ReplaceAll(doc, []byte("BAC-07"), []byte("BAC-09")), 0o644)
	for cfg, ok := range map[string]bool{filepath.Join(x, ConfigPath): true, table: true, other: false} {
		out, err := exec.Command(filepath.Join(x, "usr/bin/tablectl"), "manifest", "check", "--manifest", filepath.Join(x, ManifestPath),
			"--pubkey", filepath.Join(x, ManifestPubPath), "--exe", filepath.Join(x, BinPath), "--config", cfg).CombinedOutput()
		if (err == nil) != ok {
			t.Errorf("tablectl manifest check --config %s: %v, want ok %v\n%s", cfg, err, ok, out)
		}
	}
}

// TestBuildUnsigned: --unsigned makes a package with no manifest and no
// public key (the table it installs refuses to deal while
// self_check.require is set).
func TestBuildUnsigned(t *testing.T) {
	testenv.Long(t, "building the .deb (a full go build)")
	dpkg := testenv.Command(t, "dpkg-deb", "dpkg")
	deb, err := Build(context.Background(), Options{Root: root(t), Arch: "amd64", Version: "1.0", Out: t.TempDir(), Unsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command(dpkg, "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, list)
	}
	if strings.Contains(string(list), "/usr/lib/tablectl/") {
		t.Errorf("an unsigned package carries manifest files:\n%s", list)
	}
}

// TestBuildArm64: the arm64 package's binary is cross-compiled with cgo
// (SQLite), and its manifest hashes that arm64 binary.
func TestBuildArm64(t *testing.T) {
	testenv.Long(t, "cross-compiling for arm64")
	testenv.Command(t, Arches["arm64"], "gcc-aarch64-linux-gnu")
	dpkg := testenv.Command(t, "dpkg-deb", "dpkg")
	key := buildKey(t)
	deb, err := Build(context.Background(), Options{Root: root(t), Arch: "arm64", Version: "1.0.0", Out: t.TempDir(), ManifestKey: key})
	if err != nil {
		t.Fatal(err)
	}
	x := t.TempDir()
	if out, err := exec.Command(dpkg, "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	bin := filepath.Join(x, BinPath)
	m := checkManifest(t, x, key, 1)
	sum, err := selfcheck.HashFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if m.Files[0].Role != selfcheck.RoleExecutable || m.Files[0].SHA256 != sum {
		t.Errorf("the arm64 manifest's executable %+v is not the arm64 binary (%s)", m.Files[0], sum)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Fatalf("machine %v", f.Machine)
	}
	if libs, _ := f.ImportedLibraries(); !strings.Contains(strings.Join(libs, " "), "libc.so") {
		t.Errorf("not linked with cgo: %v", libs)
	}
}

// TestReproducibleLintianClean: the same tree, build key and source date
// give the same package twice, byte for byte, each build in a work folder
// of its own (reproducible-builds.org); and lintian, Debian's own check,
// finds no error in it and no warning without an override that says why.
func TestReproducibleLintianClean(t *testing.T) {
	testenv.Long(t, "building the .deb twice (full go builds) and lintian")
	lintian := testenv.Command(t, "lintian", "lintian")
	r := root(t)
	key := buildKey(t)
	made := CommitTime(r)
	if made.IsZero() {
		made = time.Date(2025, 6, 1, 6, 30, 0, 0, time.UTC)
	}
	var sums [2]string
	var debs [2]string
	for i := range debs {
		if i == 1 {
			// A file another program left in the tree (a demo's folder, a
			// test's output) between the builds changes nothing: the
			// revision is the commit's, changes are tracked files'.
			stray := filepath.Join(r, fmt.Sprintf(".repro-stray-%d", os.Getpid()))
			if err := os.WriteFile(stray, []byte("not the source\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(stray) })
		}
		deb, err := Build(context.Background(), Options{Root: r, Arch: runtime.GOARCH, Version: "1.2.3", Out: t.TempDir(), ManifestKey: key, Made: made, Log: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(deb)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = fmt.Sprintf("%x", sha256.Sum256(b))
		debs[i] = deb
	}
	t.Logf("sha256 %s and %s", sums[0], sums[1])
	if sums[0] != sums[1] {
		out, _ := exec.Command("cmp", "-l", debs[0], debs[1]).CombinedOutput()
		if len(out) > 2000 {
			out = out[:2000]
		}
		t.Errorf("two builds differ: %s and %s\n%s\nthe files that differ:\n%s", sums[0], sums[1], out, differingFiles(t, debs[0], debs[1]))
	}
	// --fail-on warning: an error or a warning not overridden fails it;
	// info and pedantic tags are listed for the reader.
	cmd := exec.Command(lintian, "--fail-on", "error,warning", "--display-level", ">=info", "--tag-display-limit", "0", debs[0])
	out, err := cmd.CombinedOutput()
	t.Logf("lintian %s:\n%s", filepath.Base(debs[0]), out)
	if err != nil {
		t.Errorf("lintian: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
			t.Errorf("lintian: %s", l)
		}
	}
}

// differingFiles names the files whose md5sums differ between two
// packages (dpkg-deb's view of them), for the reader of a failed build.
func differingFiles(t *testing.T, a, b string) string {
	sums := func(deb string) map[string]string {
		out, err := exec.Command("dpkg-deb", "-I", deb, "md5sums").Output()
		if err != nil {
			t.Logf("dpkg-deb -I %s md5sums: %v", deb, err)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				m[f[1]] = f[0]
			}
		}
		return m
	}
	sa, sb := sums(a), sums(b)
	var diff []string
	for f, h := range sa {
		if sb[f] != h {
			diff = append(diff, f)
		}
	}
	for f := range sb {
		if _, ok := sa[f]; !ok {
			diff = append(diff, f)
		}
	}
	slices.Sort(diff)
	if len(diff) == 0 {
		return "(no file's md5sum differs: the difference is in the archives' own bytes)"
	}
	return strings.Join(diff, "\n")
}
