package debpkg

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/testenv"
)

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
	for k, s := range Scripts {
		if fi, err := os.Stat(filepath.Join(r, s)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: %v (mode %v)", k, err, fi)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{Arch: "mips", Version: "1.0"}, {Arch: "amd64", Version: "v1.0"}, {Arch: "amd64"}} {
		if _, err := Build(context.Background(), o); err == nil {
			t.Errorf("%+v built", o)
		}
	}
}

// TestBuildDeb builds the amd64 package with an extra file (as the signed
// manifest goes in) and reads it back with dpkg-deb: every listed file at
// its place with its owner and mode, the conffile, the scripts, the
// binary's stamped version.
func TestBuildDeb(t *testing.T) {
	testenv.Long(t, "building the .deb (a full go build)")
	dpkg := testenv.Command(t, "dpkg-deb", "dpkg")
	r := root(t)
	extra := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(extra, []byte(`{"test":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	deb, err := Build(context.Background(), Options{Root: r, Arch: "amd64", Version: "9.8.7", Out: out,
		Extra: []File{{Src: extra, Dst: ManifestPath, Mode: 0o644}}, Log: t.Logf})
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
		"drwxr-x--- root/tablectl 0 1970-01-01 00:00 ./etc/tablectl/",
		"-rw-r----- root/tablectl", "./etc/tablectl/tablectl.json",
		"drwxr-x--- tablectl/tablectl 0 1970-01-01 00:00 ./var/lib/tablectl/",
		"-rwxr-xr-x root/root", "./usr/bin/tablectl",
		"." + ManifestPath,
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
	info, err := exec.Command(dpkg, "-I", deb).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Package: tablectl", "Version: 9.8.7", "Architecture: amd64", "Depends: adduser", "preinst", "postinst", "prerm", "postrm"} {
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
}

// TestBuildArm64: the binary cross-compiles for arm64 with cgo (SQLite).
func TestBuildArm64(t *testing.T) {
	testenv.Long(t, "cross-compiling for arm64")
	testenv.Command(t, Arches["arm64"], "gcc-aarch64-linux-gnu")
	bin := filepath.Join(t.TempDir(), "tablectl")
	if err := BuildBinary(context.Background(), root(t), "arm64", "1.0.0", bin); err != nil {
		t.Fatal(err)
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
