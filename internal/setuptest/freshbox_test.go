package setuptest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestFreshBoxInstall is the test command's install step on a fresh
// Debian 12 box: .ci/install run as root in a clean container (the cached
// debootstrap tree of .ci/debian-tree under a throw-away overlay, run with
// systemd-nspawn), while another process holds the package manager's
// locks, as unattended upgrades do. It must wait for them rather than
// fail, and afterwards every command and file .ci/packages lists, the
// tools the suite uses, must be in the box.
func TestFreshBoxInstall(t *testing.T) {
	testenv.Long(t, "the test command's install step in a clean Debian 12 container")
	testenv.Root(t, "to mount an overlay and run systemd-nspawn")
	nspawn := testenv.Command(t, "systemd-nspawn", "systemd-container")
	testenv.Command(t, "debootstrap", "debootstrap")
	r := root(t)
	l := readPackages(t)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	box := overlay(t, debianTree(ctx, t, r))
	// apt's downloads, kept between runs so the next one unpacks only.
	archives := filepath.Join(ciCache(), "apt-archives")
	if err := os.MkdirAll(archives, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, nspawn, append([]string{"-q", "-D", box, "--register=no", "--keep-unit", "--pipe",
			"--bind-ro=" + filepath.Join(r, ".ci") + ":/src/.ci", "--bind=" + archives + ":/var/cache/apt/archives",
			"-E", "LANG=C.UTF-8"}, args...)...)
	}

	// The box is thrown away after the test: dpkg need not sync each file
	// it unpacks (what makes an install slow on a busy machine).
	if err := os.WriteFile(filepath.Join(box, "etc/apt/apt.conf.d/99throwaway-box"), []byte("DPkg::Options { \"--force-unsafe-io\"; };\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The box's package manager, busy: its lists lock and the dpkg
	// frontend lock held from outside, as another apt-get holds them.
	release := holdLocks(t, box, "var/lib/apt/lists/lock", "var/lib/dpkg/lock-frontend")
	install := run(ctx, "/src/.ci/install")
	var log logtail.Buffer
	waiting := make(chan struct{})
	pr, pw := io.Pipe()
	install.Stdout, install.Stderr = pw, pw
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			log.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), "waiting for the package manager's lock") {
				once.Do(func() { close(waiting) })
			}
		}
	}()
	if err := install.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- install.Wait(); pw.Close() }()
	select {
	case <-waiting:
		t.Logf("the install waits for the lock: %s", logtail.Lines(log.String(), 2))
	case err := <-exited:
		t.Fatalf(".ci/install ended (%v) while the package manager's locks were held, instead of waiting:\n%s", err, log.String())
	case <-ctx.Done():
		t.Fatalf("no word of waiting for the lock:\n%s", log.String())
	}
	// Still waiting a moment later: the lock is waited on, not failed on.
	select {
	case err := <-exited:
		t.Fatalf(".ci/install ended (%v) while the locks were still held:\n%s", err, log.String())
	case <-time.After(3 * time.Second):
	}
	release()
	if err := <-exited; err != nil {
		t.Fatalf(".ci/install in a fresh Debian 12 box: %v\n%s", err, logtail.Lines(log.String(), 60))
	}
	t.Logf(".ci/install:\n%s", logtail.Lines(log.String(), 10))

	// Every tool the suite uses is now in the box, checked here, not by
	// .ci/install's own test of it.
	var script strings.Builder
	for _, pkg := range l.names {
		for _, thing := range l.things[pkg] {
			if strings.HasPrefix(thing, "/") {
				script.WriteString("[ -e " + thing + " ] || echo 'missing: " + thing + " (" + pkg + ")'\n")
			} else {
				script.WriteString("command -v " + thing + " >/dev/null || echo 'missing: " + thing + " (" + pkg + ")'\n")
			}
		}
	}
	out, err := run(ctx, "/bin/sh", "-c", script.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("checking the box: %v\n%s", err, out)
	}
	// Only the script's own lines: systemd-nspawn adds words of its own.
	var missing []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "missing: ") {
			missing = append(missing, line)
		}
	}
	if len(missing) > 0 {
		t.Errorf("after .ci/install the fresh box lacks what the suite uses:\n%s", strings.Join(missing, "\n"))
	}
	// And .ci/install, run again, finds nothing to do.
	if out, err := run(ctx, "/src/.ci/install").CombinedOutput(); err != nil || !strings.Contains(string(out), "every package of .ci/packages is here") {
		t.Errorf(".ci/install a second time: %v\n%s", err, out)
	}
}

// ciCache is where the suite's machine-wide fixtures are kept between
// runs (.ci/debian-tree's TABLECTL_CI_CACHE).
func ciCache() string {
	if d := os.Getenv("TABLECTL_CI_CACHE"); d != "" {
		return d
	}
	return "/var/cache/tablectl-ci"
}

// debianTree is .ci/debian-tree's cached Debian 12 tree, built when
// missing.
func debianTree(ctx context.Context, t *testing.T, r string) string {
	t.Helper()
	var log logtail.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(r, ".ci/debian-tree"))
	cmd.Stderr = &log
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf(".ci/debian-tree could not make the Debian 12 tree: %v\n%s", err, logtail.Lines(log.String(), 40))
	}
	return strings.TrimSpace(string(out))
}

// overlay mounts a writable overlay over the tree, thrown away when the
// test ends: a clean box every run, the cached tree untouched.
func overlay(t *testing.T, tree string) string {
	t.Helper()
	dir := t.TempDir()
	upper, work, merged := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "box")
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("overlay", merged, "overlay", 0, "lowerdir="+tree+",upperdir="+upper+",workdir="+work); err != nil {
		t.Fatalf("mount an overlay on %s: %v", tree, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", merged, err)
		}
	})
	return merged
}

// holdLocks takes the write locks apt and dpkg take (fcntl, the whole
// file) on the box's lock files, as a second apt-get would hold them, and
// returns what releases them.
func holdLocks(t *testing.T, box string, files ...string) (release func()) {
	t.Helper()
	var held []*os.File
	for _, f := range files {
		path := filepath.Join(box, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
		if err := unix.FcntlFlock(fh.Fd(), unix.F_SETLK, &lk); err != nil {
			t.Fatalf("lock %s: %v", path, err)
		}
		held = append(held, fh)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, fh := range held {
				fh.Close() // closing drops the process's fcntl locks on it
			}
		})
	}
	t.Cleanup(release)
	return release
}
