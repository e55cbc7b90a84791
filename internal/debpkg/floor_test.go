package debpkg

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/testenv"
)

// TestFloorPackage builds the floor's package, without a build key (it
// carries no manifest), and reads it back: its files at their places with
// their owners and modes, the flags' file a conffile, Conflicts with the
// table's package, none of the table's files; the binary runs and says its
// version; lintian finds no error and no warning without an override; and
// systemd-analyze verify passes the witness's unit as installed (the
// package unpacked as the root, so the unit's binary is the package's).
func TestFloorPackage(t *testing.T) {
	testenv.Long(t, "building the floor's .deb (a full go build) and lintian")
	dpkg := testenv.Command(t, "dpkg-deb", "dpkg")
	lintian := testenv.Command(t, "lintian", "lintian")
	analyze := testenv.Command(t, "systemd-analyze", "systemd")
	r := root(t)
	made := time.Date(2025, 6, 1, 6, 30, 0, 0, time.UTC)
	deb, err := Build(context.Background(), Options{Root: r, Arch: runtime.GOARCH, Version: "9.8.7", Out: t.TempDir(), Package: Floor, Made: made, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(deb) != "tablectl-floor_9.8.7_"+runtime.GOARCH+".deb" {
		t.Errorf("package %s", deb)
	}
	out, err := exec.Command(dpkg, "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, out)
	}
	list := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		"drwxr-x--- root/tablectl-floor 0 2025-06-01 06:30 ./etc/tablectl/",
		"drwxr-x--- root/tablectl-floor 0 2025-06-01 06:30 ./etc/tablectl/keys/",
		"drwx------ root/root 0 2025-06-01 06:30 ./etc/tablectl/floor-logins/",
		"drwxr-x--- tablectl-floor/tablectl-floor 0 2025-06-01 06:30 ./var/lib/tablectl-floor/",
		"-rw-r----- root/tablectl-floor", "./etc/tablectl/floor-witness.env",
		"-rwxr-xr-x root/root", "./usr/bin/tablectl-floor",
		"./lib/systemd/system/tablectl-floor-witness.service",
		"./usr/share/man/man1/tablectl-floor.1.gz", "./usr/share/man/man1/tablectl-floor-witness.1.gz",
		"./usr/share/bash-completion/completions/tablectl-floor", "./usr/share/doc/tablectl-floor/copyright",
		"./usr/share/doc/tablectl-floor/floor.md", "./usr/share/lintian/overrides/tablectl-floor",
	} {
		if !strings.Contains(list, want) {
			t.Errorf("dpkg-deb -c lacks %q:\n%s", want, out)
		}
	}
	for _, f := range FloorContents(r, "") {
		if !strings.Contains(list, "."+f.Dst) {
			t.Errorf("package lacks %s", f.Dst)
		}
	}
	// Nothing of the table's: its binary, its unit, its config, its
	// manifest (the floor runs no self-check).
	for _, f := range append(Contents(r, ""), File{Dst: ManifestPath}, File{Dst: ManifestPubPath}) {
		if !f.Dir && (strings.Contains(list, "."+f.Dst+" ") || strings.HasSuffix(list, "."+f.Dst)) {
			t.Errorf("the floor's package carries the table's %s", f.Dst)
		}
	}
	info, err := exec.Command(dpkg, "-I", deb).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Package: tablectl-floor", "Version: 9.8.7", "Depends: adduser", "Conflicts: tablectl\n", "preinst", "postinst", "prerm", "postrm"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("dpkg-deb -I lacks %q:\n%s", want, info)
		}
	}
	conf, err := exec.Command(dpkg, "-I", deb, "conffiles").CombinedOutput()
	if err != nil || strings.TrimSpace(string(conf)) != FloorEnvPath {
		t.Errorf("conffiles %q: %v", conf, err)
	}
	x := t.TempDir()
	if out, err := exec.Command(dpkg, "-x", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v, err := exec.Command(filepath.Join(x, FloorBinPath), "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(v), "tablectl 9.8.7 ") {
		t.Errorf("tablectl-floor version: %q %v", v, err)
	}
	// The unit as the package installs it, its binary the package's,
	// beside the system's targets its default dependencies name.
	unit := filepath.Join(x, FloorUnitPath)
	targets, _ := filepath.Glob("/lib/systemd/system/*.target")
	for _, tg := range targets {
		if b, err := os.ReadFile(tg); err == nil {
			os.WriteFile(filepath.Join(x, tg), b, 0o644)
		}
	}
	if out, err := exec.Command(analyze, "verify", "--root", x, unit).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", FloorUnitPath, err, out)
	}
	// And it fails a unit whose binary is not where it says (the check
	// can fail).
	broken := filepath.Join(x, "lib/systemd/system/tablectl-floor-broken.service")
	b, _ := os.ReadFile(unit)
	os.WriteFile(broken, []byte(strings.ReplaceAll(string(b), FloorBinPath, "/usr/bin/tablectl-nowhere")), 0o644)
	if out, err := exec.Command(analyze, "verify", "--root", x, broken).CombinedOutput(); err == nil {
		t.Errorf("systemd-analyze verify passed a unit with no binary:\n%s", out)
	}
	cmd := exec.Command(lintian, "--fail-on", "error,warning", "--display-level", ">=info", "--tag-display-limit", "0", deb)
	lout, err := cmd.CombinedOutput()
	t.Logf("lintian %s:\n%s", filepath.Base(deb), lout)
	if err != nil {
		t.Errorf("lintian: %v", err)
	}
	for _, l := range strings.Split(string(lout), "\n") {
		if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") {
			t.Errorf("lintian: %s", l)
		}
	}
}
