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

// TestPackagedFloorSystemd installs the floor's package on a Debian 12
// system with systemd as PID 1 (the packaged-install test's tree, a copy of
// its own), as a floor server's operator does: dpkg -i; the package's user
// and folders; the witness's flags set in its file (a NATS node in the box,
// the nats-server the tests run; a SQLite store), the registry written;
// the unit enabled and started: it runs as tablectl-floor, stays up, makes
// its store in its state folder, and its hardening is what
// systemd-analyze security reports for the table's.
func TestPackagedFloorSystemd(t *testing.T) {
	testenv.Long(t, "the floor's packaged install under systemd-nspawn")
	testenv.Root(t, "to boot a container with systemd-nspawn")
	nspawn := testenv.Command(t, "systemd-nspawn", "systemd-container")
	testenv.Command(t, "debootstrap", "debootstrap")
	testenv.Command(t, "nsenter", "util-linux")
	natsBin := os.Getenv("TABLECTL_NATS_SERVER")
	if natsBin == "" {
		natsBin, _ = exec.LookPath("nats-server")
	}
	if natsBin == "" {
		testenv.Command(t, "nats-server", "nats-server")
	}
	r := root(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tree := debianTree(t, ctx, r)
	deb, err := Build(ctx, Options{Root: r, Arch: runtime.GOARCH, Version: "0.0.1", Out: t.TempDir(), Package: Floor, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	box := newBox(t, ctx, tree, "tablectl-floor-box-")
	for _, c := range [][]string{{"cp", deb, filepath.Join(box, "root/tablectl-floor.deb")}, {"cp", natsBin, filepath.Join(box, "usr/local/bin/nats-server")}} {
		if out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	c := boot(t, nspawn, box)
	c.sh("dpkg -i /root/tablectl-floor.deb")
	if out := c.sh("id -nG tablectl-floor"); strings.TrimSpace(out) != "tablectl-floor" {
		t.Errorf("tablectl-floor's groups: %s", out)
	}
	if out := c.sh("stat -c '%U:%G %a %n' /etc/tablectl /etc/tablectl/keys /etc/tablectl/floor-logins /etc/tablectl/floor-witness.env /var/lib/tablectl-floor"); out !=
		"root:tablectl-floor 750 /etc/tablectl\nroot:tablectl-floor 750 /etc/tablectl/keys\nroot:root 700 /etc/tablectl/floor-logins\n"+
			"root:tablectl-floor 640 /etc/tablectl/floor-witness.env\ntablectl-floor:tablectl-floor 750 /var/lib/tablectl-floor\n" {
		t.Errorf("owners and modes:\n%s", out)
	}
	// Not enabled until the operator has set it up; the unit as installed
	// verifies.
	if out, _ := c.run(30*time.Second, "systemctl is-enabled tablectl-floor-witness"); strings.TrimSpace(out) != "disabled" {
		t.Errorf("is-enabled after the install: %s", out)
	}
	if out := c.sh("systemd-analyze verify /lib/systemd/system/tablectl-floor-witness.service 2>&1; echo rc=$?"); !strings.HasSuffix(strings.TrimSpace(out), "rc=0") {
		t.Errorf("systemd-analyze verify in the box: %s", out)
	}
	// The floor's broker (one node, JetStream) and the set-up.
	c.sh("systemd-run --unit=nats /usr/local/bin/nats-server -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats")
	c.waitForUnit("nats", "systemctl is-active nats")
	c.sh(`printf '{"tables": {}}\n' > /etc/tablectl/floor.json &&
		sed -i -e 's|^WITNESS_NATS=.*|WITNESS_NATS=nats://127.0.0.1:4222|' -e 's|^WITNESS_DB=.*|WITNESS_DB=/var/lib/tablectl-floor/floor.db|' \
			-e 's|^WITNESS_FLAGS=.*|WITNESS_FLAGS=--replicas 1|' /etc/tablectl/floor-witness.env &&
		systemctl enable --now tablectl-floor-witness`)
	c.waitForUnit("tablectl-floor-witness", "journalctl -u tablectl-floor-witness --no-pager -o cat | grep -q 'witness running'")
	if out := c.sh("systemctl is-active tablectl-floor-witness; stat -c %U /proc/$(systemctl show --value -p MainPID tablectl-floor-witness); stat -c '%U %n' /var/lib/tablectl-floor/floor.db"); out !=
		"active\ntablectl-floor\ntablectl-floor /var/lib/tablectl-floor/floor.db\n" {
		t.Errorf("the running witness:\n%s\n%s", out, c.try("journalctl -u tablectl-floor-witness --no-pager | tail -20"))
	}
	sec := c.sh("systemd-analyze security tablectl-floor-witness --no-pager | tail -1")
	t.Logf("systemd-analyze security tablectl-floor-witness: %s", strings.TrimSpace(sec))
	if !strings.Contains(sec, "Overall exposure level for tablectl-floor-witness.service: 1.") {
		t.Errorf("exposure: %s", sec)
	}
	c.stop()
}

// waitForUnit polls a script until it succeeds (60 s), with the unit's
// journal when it does not.
func (c *container) waitForUnit(unit, script string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out string
	var err error
	if werr := testenv.WaitFor(ctx, unit, func() bool { out, err = c.run(20*time.Second, script); return err == nil }); werr != nil {
		c.t.Fatalf("no %s: %v\n%s\njournal:\n%s", unit, err, out, c.try("journalctl -u "+unit+" --no-pager | tail -30"))
	}
}
