package debpkg

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestPackagedInstallSystemd is the install an operator does, on a Debian
// 12 system with systemd as PID 1 (systemd-nspawn --boot on a debootstrap
// tree, built by .ci/debian-tree and cached under /var/cache/tablectl-ci)
// and Debian's stock Mosquitto: dpkg -i the .deb, tablectl init, the
// shipped Mosquitto snippet in conf.d beside the stock mosquitto.conf,
// start the service, deal from a simulated shoe on a pseudo-terminal, see
// the table on MQTT, restart the service and then the whole container, and
// verify the trail with the checkpoint public key. The package is signed
// with a build key made here: the installed controller's self-check passes
// with the config as shipped; an edited config makes the table refuse to
// deal (self_check_failed) until it is put back.
func TestPackagedInstallSystemd(t *testing.T) {
	testenv.Long(t, "the packaged install under systemd-nspawn")
	testenv.Root(t, "to boot a container with systemd-nspawn")
	nspawn := testenv.Command(t, "systemd-nspawn", "systemd-container")
	testenv.Command(t, "debootstrap", "debootstrap")
	testenv.Command(t, "nsenter", "util-linux")
	r := root(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tree := debianTree(t, ctx, r)
	// The build key, as tablectl audit keygen makes one; it stays here.
	_, buildKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	deb, err := Build(ctx, Options{Root: r, Arch: runtime.GOARCH, Version: "0.0.1", Out: t.TempDir(), ManifestKey: buildKey, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the cached tree: the box, kept across its restarts.
	box := newBox(t, ctx, tree, "tablectl-box-")
	if out, err := exec.Command("cp", deb, filepath.Join(box, "root/tablectl.deb")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	writeCerts(t, filepath.Join(box, "root/certs"))

	c := boot(t, nspawn, box)
	// sh runs in the box as it is now (c changes when it reboots).
	sh := func(script string) string {
		t.Helper()
		return c.sh(script)
	}
	sh("dpkg -i /root/tablectl.deb")
	// The package's user, folders and unit.
	if out := sh("id tablectl"); !strings.Contains(out, "(dialout)") {
		t.Errorf("tablectl is not in dialout: %s", out)
	}
	if out := sh("stat -c '%U:%G %a %n' /etc/tablectl /etc/tablectl/tablectl.json /var/lib/tablectl"); out != "root:tablectl 750 /etc/tablectl\nroot:tablectl 640 /etc/tablectl/tablectl.json\ntablectl:tablectl 750 /var/lib/tablectl\n" {
		t.Errorf("owners and modes:\n%s", out)
	}
	if out := sh("systemctl is-enabled tablectl"); strings.TrimSpace(out) != "enabled" {
		t.Errorf("not enabled: %s", out)
	}
	t.Logf("installed: %s", sh("tablectl version"))

	// The operator's set-up: the box's keys and passwords, Mosquitto's
	// snippet with the table's certificate, the shoe's port.
	t.Logf("tablectl init:\n%s", sh("tablectl init --supervisor alice.martin"))
	if out := sh("stat -c '%U:%G %a %n' /etc/tablectl/keys/checkpoint.key /etc/tablectl/mqtt.password /etc/tablectl/supervisors.json /etc/tablectl/keys/officer.pub /etc/mosquitto/tablectl.passwd /root/tablectl-handoff/alice.martin.key /root/tablectl-handoff/officer.key"); out !=
		"root:tablectl 640 /etc/tablectl/keys/checkpoint.key\nroot:tablectl 640 /etc/tablectl/mqtt.password\nroot:tablectl 640 /etc/tablectl/supervisors.json\nroot:tablectl 640 /etc/tablectl/keys/officer.pub\nmosquitto:mosquitto 600 /etc/mosquitto/tablectl.passwd\nroot:root 600 /root/tablectl-handoff/alice.martin.key\nroot:root 600 /root/tablectl-handoff/officer.key\n" {
		t.Errorf("init's owners and modes:\n%s", out)
	}
	// The same certificate for the web display's HTTPS (http.cert_file).
	sh(`install -m 0640 -g tablectl /root/certs/table.crt /root/certs/table.key /etc/tablectl/tls/`)
	sh(`install -d -m 0755 /etc/mosquitto/certs && install -m 0644 /root/certs/ca.crt /root/certs/table.crt /etc/mosquitto/certs/ &&
		install -m 0600 -o mosquitto /root/certs/table.key /etc/mosquitto/certs/ &&
		install -m 0644 /usr/share/tablectl/mosquitto/mosquitto.conf /etc/mosquitto/conf.d/tablectl.conf && systemctl restart mosquitto`)
	if out := sh("systemctl is-active mosquitto"); strings.TrimSpace(out) != "active" {
		t.Fatalf("mosquitto with the snippet: %s\n%s", out, sh("journalctl -u mosquitto --no-pager | tail -20"))
	}
	// The shoe: a simulated one on a pseudo-terminal (pts), which the
	// unit's device policy must let in, as it lets in ttyUSB. It is at
	// /dev/tablectl-shoe, where udev names a real one, so the config stays
	// as shipped and signed.
	sh(`ln -sfn /run/tablectl-sim/shoe /dev/tablectl-shoe &&
		mkdir -p /etc/systemd/system/tablectl.service.d && printf '[Service]\nDeviceAllow=char-pts rw\n' > /etc/systemd/system/tablectl.service.d/simulated-shoe.conf &&
		systemctl daemon-reload`)
	const sim = "systemd-run --uid=tablectl --gid=tablectl -p RuntimeDirectory=tablectl-sim "
	const simArgs = "/usr/bin/tablectl shoe-sim --link /run/tablectl-sim/shoe --pace 20ms --coup-pace 3500ms --exit "
	// config check runs the self-check too: the shipped manifest covers
	// the shipped binary and config.
	if out := sh("tablectl config check /etc/tablectl/tablectl.json; echo rc=$?"); !strings.Contains(out, "rc=0") || strings.Contains(out, "self_check") {
		t.Errorf("config check: %s", out)
	}
	pit := "mosquitto_sub -h 127.0.0.1 -u pit-BAC-07 -P \"$(cat /etc/tablectl/pit-BAC-07.password)\" "

	// The controller first: it waits for the shoe's port. The dealer's
	// pace leaves the result its 3 s (table.result_time) between coups.
	sh("systemctl start tablectl")
	c.waitFor("the service", "systemctl is-active tablectl")
	sh(sim + "--unit=shoe-sim " + simArgs + "--seed 15 --coups 4")
	// coupOnMQTT waits for the retained public/shoe to be at coup 4 or
	// later (the next coup opens once a result has shown).
	coupOnMQTT := func() {
		t.Helper()
		c.waitFor("coup 4 or later on MQTT", pit+`-t tablectl/BAC-07/public/shoe -C 1 -W 5 | grep -Eq '"shoe":1,"coup":([4-9]|[1-9][0-9])[,}]'`)
	}
	coupOnMQTT()
	if out := sh(pit + "-t tablectl/BAC-07/status -C 1 -W 5"); !strings.Contains(out, "online") {
		t.Errorf("status %s", out)
	}
	mainUser := func() string {
		return strings.TrimSpace(sh("stat -c %U /proc/$(systemctl show --value -p MainPID tablectl)"))
	}
	if u := mainUser(); u != "tablectl" {
		t.Errorf("the service runs as %q", u)
	}
	// The self-check passed, for /health and in the trail, and the table deals.
	c.waitHealth(func(code int, h boxHealth) bool { return code == 200 && h.SelfCheck == "ok" })
	if checks := selfChecks(c.trail()); len(checks) != 1 || checks[0].Result != coup.SelfCheckOK || !checks[0].Start ||
		checks[0].Key != audit.KeyID(buildKey.Public().(ed25519.PublicKey)) {
		t.Errorf("self-checks: %+v", checks)
	}
	// The hardening as the installed, running unit has it (docs/operations.md).
	sec := sh("systemd-analyze security tablectl --no-pager | tail -1")
	t.Logf("systemd-analyze security tablectl: %s", strings.TrimSpace(sec))
	if !strings.Contains(sec, "Overall exposure level for tablectl.service: 1.") {
		t.Errorf("exposure: %s", sec)
	}

	// Restart the service, then the box, once the dealer has dealt the
	// four coups (a shoe that goes quiet between coups is no misdeal).
	c.waitFor("the four coups dealt", "! systemctl is-active -q shoe-sim")
	sh("systemctl restart tablectl")
	c.waitFor("the service back", "systemctl is-active tablectl")
	c.waitFor("status online after the restart", pit+"-t tablectl/BAC-07/status -C 1 -W 5 | grep -q online")
	c.stop()
	c = boot(t, nspawn, box)
	c.waitFor("the service started at boot", "systemctl is-active tablectl")
	c.waitFor("status online after the reboot", pit+"-t tablectl/BAC-07/status -C 1 -W 5 | grep -q online")
	if u := mainUser(); u != "tablectl" {
		t.Errorf("after the reboot the service runs as %q", u)
	}
	// The table as it was: coup 4 of shoe 1, rebuilt from the trail.
	coupOnMQTT()

	// A supervisor's commands on the box, with no broker, table or login
	// given: init's client.json names the box's Mosquitto, the table and
	// the supervisors' login (issue 35); each is accepted.
	for _, cmd := range []string{`suspend --reason "a test"`, "resume"} {
		if out := sh("tablectl " + cmd + " --key /root/tablectl-handoff/alice.martin.key"); !strings.Contains(out, `"result":"accepted"`) {
			t.Errorf("tablectl %s on the box: %s", cmd, out)
		}
	}
	// The same command to the demo's port is told apart: refused, at once.
	if out, err := c.run(30*time.Second, "tablectl suspend --broker tcp://127.0.0.1:1884 --key /root/tablectl-handoff/alice.martin.key"); err == nil ||
		!strings.Contains(out, "tablectl suspend: connection refused: nothing listens at tcp://127.0.0.1:1884") {
		t.Errorf("a command to a port with no broker: %v\n%s", err, out)
	}

	// The config edited on the box (not re-signed): at the restart the
	// self-check fails and the table refuses to deal; put back, the check
	// passes.
	code, h := c.health()
	t.Logf("before the edit: /health %d %+v", code, h)
	sh(`cp -p /etc/tablectl/tablectl.json /root/tablectl.json.signed && sed -i 's/"result_time": "3s"/"result_time": "4s"/' /etc/tablectl/tablectl.json`)
	if out := sh("tablectl config check /etc/tablectl/tablectl.json; echo rc=$?"); !strings.Contains(out, "rc=1") || !strings.Contains(out, "error: self_check: ") {
		t.Errorf("config check of the edited config: %s", out)
	}
	sh("ln -sfn /run/tablectl-sim/shoe /dev/tablectl-shoe && systemctl restart tablectl")
	c.waitHealth(func(code int, h boxHealth) bool {
		return code == 503 && h.Status == "self_check_failed" && h.SelfCheck == "failed"
	})
	sh(sim + "--unit=shoe-sim-edited " + simArgs + "--seed 18 --coups 1")
	c.waitFor("the simulated coup drawn", "! systemctl is-active -q shoe-sim-edited")
	rows := c.trail()
	checks := selfChecks(rows)
	failed := checks[len(checks)-1]
	if failed.Result != coup.SelfCheckFailed || !failed.Start ||
		!strings.Contains(failed.Detail, "the config file /etc/tablectl/tablectl.json is not the signed one") {
		t.Errorf("self-check with the edited config: %+v", failed)
	}
	evs, alerts := eventsAfter(rows, failed)
	if alerts[coup.AlertSelfCheck] != 1 || evs[coup.EventKind(coup.InCard)] == 0 || alerts[coup.AlertCardSuspended] == 0 ||
		evs[coup.EvBurnCard]+evs[coup.EvCardDealt]+evs[coup.EvCoupResult] != 0 {
		t.Errorf("with the edited config: the shoe's cards and the table's events %v, alerts %v", evs, alerts)
	}
	t.Logf("with the edited config: /health self_check_failed; %d cards drawn, none dealt; alerts %v", evs[coup.EventKind(coup.InCard)], alerts)
	sh("cp -p /root/tablectl.json.signed /etc/tablectl/tablectl.json && systemctl restart tablectl")
	c.waitHealth(func(code int, h boxHealth) bool { return h.SelfCheck == "ok" })
	if checks := selfChecks(c.trail()); checks[len(checks)-1].Result != coup.SelfCheckOK || !checks[len(checks)-1].Start {
		t.Errorf("self-check with the config put back: %+v", checks[len(checks)-1])
	}
	// (The misdeals drawn while it refused are then the supervisor's to
	// clear with resume, once the shoe is back.)

	// The trail verifies against the checkpoint public key init handed off,
	// and each start row names the build.
	if out := c.sh("tablectl audit verify --db /var/lib/tablectl/trail --pubkey /etc/tablectl/keys/checkpoint.pub; echo rc=$?"); !strings.Contains(out, "rc=0") {
		t.Errorf("audit verify:\n%s", out)
	}
	starts := 0
	for _, line := range strings.Split(c.sh("tablectl audit export --db /var/lib/tablectl/trail"), "\n") {
		if strings.Contains(line, `"ctl.start"`) {
			starts++
			if !strings.Contains(line, `"version":"0.0.1`) {
				t.Errorf("start row without the version: %s", line)
			}
		}
	}
	if starts < 5 {
		t.Errorf("%d start rows, want 5 (start, service restart, reboot, edited config, put back)", starts)
	}
	if out := c.sh("journalctl -u tablectl --no-pager -o cat | grep 'controller running' | head -1"); !strings.Contains(out, "version=") {
		t.Errorf("start log without the version: %s", out)
	}
	c.stop()
}

// debianTree is the Debian 12 tree the packaged-install tests boot: built
// when missing (.ci/debian-tree: debootstrap from deb.debian.org, about
// 1.5 min), else the cached one.
func debianTree(t *testing.T, ctx context.Context, r string) string {
	t.Helper()
	var treeLog bytes.Buffer
	treeCmd := exec.CommandContext(ctx, filepath.Join(r, ".ci/debian-tree"))
	treeCmd.Stderr = &treeLog
	treeOut, err := treeCmd.Output()
	if err != nil {
		log := treeLog.String()
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		t.Fatalf(".ci/debian-tree could not make the Debian 12 tree: %v\n%s", err, log)
	}
	return strings.TrimSpace(string(treeOut))
}

// newBox is a copy of tree for one test's box, kept after a failure for
// its journal (journalctl -D BOX/var/log/journal).
func newBox(t *testing.T, ctx context.Context, tree, prefix string) string {
	t.Helper()
	boxDir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the box is kept in %s", boxDir)
			return
		}
		os.RemoveAll(boxDir)
	})
	box := filepath.Join(boxDir, "box")
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", tree, box).CombinedOutput(); err != nil {
		t.Fatalf("copy the tree: %v\n%s", err, out)
	}
	return box
}

// boxHealth is the web display's /health, as far as the test reads it.
type boxHealth struct {
	Status    string `json:"status"`
	SelfCheck string `json:"self_check"`
}

// health asks the box's web display for /health over HTTPS (the test CA's
// certificate for localhost), from inside the box's network (it has a
// private one, and no curl).
func (c *container) health() (int, boxHealth) {
	c.t.Helper()
	var h boxHealth
	conn, err := dialIn(c.pid1, "127.0.0.1:8443")
	if err != nil {
		h.Status = err.Error()
		return 0, h
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(c.dir, "root/certs/ca.crt"))
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		c.t.Fatalf("the test CA: %v", err)
	}
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	req, _ := http.NewRequest("GET", "https://localhost:8443/health", nil)
	if err := req.Write(tc); err != nil {
		h.Status = err.Error()
		return 0, h
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		h.Status = err.Error()
		return 0, h
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err := json.Unmarshal(body, &h); err != nil {
		c.t.Errorf("/health %d: %v: %s", resp.StatusCode, err, body)
	}
	return resp.StatusCode, h
}

// waitHealth polls /health until ok says yes (60 s).
func (c *container) waitHealth(ok func(int, boxHealth) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var code int
	var h boxHealth
	if err := testenv.WaitFor(ctx, "/health as wanted", func() bool { code, h = c.health(); return ok(code, h) }); err != nil {
		c.t.Fatalf("%v: /health %d %+v\njournal:\n%s", err, code, h, c.try("journalctl -u tablectl --no-pager | tail -20"))
	}
}

// dialIn connects to addr from inside the network namespace of process
// pid: a thread of its own moves in, dials, and ends with its goroutine
// (never unlocked, so no other goroutine runs in the box's network).
func dialIn(pid int, addr string) (net.Conn, error) {
	type dialed struct {
		conn net.Conn
		err  error
	}
	ch := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			ch <- dialed{nil, err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- dialed{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- dialed{conn, err}
	}()
	d := <-ch
	return d.conn, d.err
}

// trail is the box's trail, read with tablectl audit export.
func (c *container) trail() []audit.Record {
	c.t.Helper()
	var rows []audit.Record
	for _, line := range strings.Split(c.sh("tablectl audit export --db /var/lib/tablectl/trail"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var row audit.Record
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			c.t.Fatalf("export line %q: %v", line, err)
		}
		rows = append(rows, row)
	}
	return rows
}

// input is a row's table input, if it is one.
func input(row audit.Record) (coup.Input, bool) {
	var in coup.Input
	if !coup.IsInput(row.Kind) || json.Unmarshal(row.Body, &in) != nil {
		return in, false
	}
	return in, true
}

// selfChecks are the self-checks the trail records, in order.
func selfChecks(rows []audit.Record) []coup.SelfCheck {
	var out []coup.SelfCheck
	for _, row := range rows {
		if in, ok := input(row); ok && in.Check != nil {
			out = append(out, *in.Check)
		}
	}
	return out
}

// eventsAfter counts the rows (events and inputs, by kind) and the alerts
// after the self-check check.
func eventsAfter(rows []audit.Record, check coup.SelfCheck) (map[coup.EventKind]int, map[coup.AlertKind]int) {
	evs, alerts := map[coup.EventKind]int{}, map[coup.AlertKind]int{}
	after := false
	for _, row := range rows {
		if in, ok := input(row); ok && in.Check != nil && reflect.DeepEqual(*in.Check, check) {
			after = true
			continue
		}
		if !after {
			continue
		}
		evs[coup.EventKind(row.Kind)]++
		if row.Kind == string(coup.EvAlert) {
			var e struct{ Alert coup.Alert }
			json.Unmarshal(row.Body, &e)
			alerts[e.Alert.Kind]++
		}
	}
	return evs, alerts
}

// container is a booted systemd-nspawn container.
type container struct {
	t      *testing.T
	dir    string
	cmd    *exec.Cmd
	pid1   int
	log    *syncBuffer
	done   chan error
	closed bool
}

// boot starts the tree at dir with systemd as PID 1 and waits until the
// system is up. No machined here (no system bus), so it does not register,
// and commands go in through nsenter.
func boot(t *testing.T, nspawn, dir string) *container {
	t.Helper()
	log := &syncBuffer{}
	cmd := exec.Command(nspawn, "-q", "-D", dir, "--register=no", "--keep-unit", "--boot", "--private-network",
		"-M", fmt.Sprintf("tablectl-ci-%d", os.Getpid()))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &container{t: t, dir: dir, cmd: cmd, log: log, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(c.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := testenv.WaitFor(ctx, "the container's systemd", func() bool {
		select {
		case err := <-c.done:
			c.closed = true
			t.Fatalf("systemd-nspawn exited: %v\n%s", err, log.String())
		default:
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		for _, f := range strings.Fields(string(kids)) {
			pid, _ := strconv.Atoi(f)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				c.pid1 = pid
			}
		}
		return c.pid1 != 0
	}); err != nil {
		t.Fatalf("the container did not start: %v\n%s", err, log.String())
	}
	// Early on there is no bus yet ("offline"): ask again.
	bctx, bcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer bcancel()
	var state string
	if err := testenv.WaitFor(bctx, "the container's boot", func() bool {
		out, _ := c.run(90*time.Second, "systemctl is-system-running --wait")
		state = strings.TrimSpace(out)
		return state == "running" || state == "degraded"
	}); err != nil {
		t.Fatalf("boot: %s: %v\n%s", state, err, c.try("systemctl --failed --no-pager"))
	}
	if state == "degraded" {
		t.Logf("booted degraded: %s", c.try("systemctl --failed --no-pager"))
	}
	return c
}

func (c *container) run(timeout time.Duration, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(c.pid1), "-a", "--", "/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// console is the end of the container's console (systemd's boot and
// shutdown messages).
func (c *container) console() string {
	s := c.log.String()
	if len(s) > 3000 {
		s = s[len(s)-3000:]
	}
	return s
}

func (c *container) try(script string) string {
	out, _ := c.run(30*time.Second, script)
	return out
}

// sh runs a script in the container, failing the test (with the units'
// journals) if it fails.
func (c *container) sh(script string) string {
	c.t.Helper()
	out, err := c.run(2*time.Minute, script)
	if err != nil {
		c.t.Fatalf("in the container: %s: %v\n%s\njournal:\n%s\nconsole:\n%s", script, err, out,
			c.try("journalctl -u tablectl -u mosquitto -u shoe-sim --no-pager | tail -40"), c.console())
	}
	return out
}

// waitFor polls a script until it succeeds (60 s).
func (c *container) waitFor(what, script string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out string
	var err error
	if werr := testenv.WaitFor(ctx, what, func() bool { out, err = c.run(20*time.Second, script); return err == nil }); werr != nil {
		c.t.Fatalf("no %s: %v\n%s\njournal:\n%s\nconsole:\n%s", what, err, out,
			c.try("journalctl -u tablectl -u mosquitto -u shoe-sim --no-pager | tail -40"), c.console())
	}
}

// stop powers the container off (SIGTERM: an orderly shutdown), killing
// it after 60 s.
func (c *container) stop() {
	if c.closed {
		return
	}
	c.closed = true
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		c.t.Errorf("the container did not shut down in 60 s:\n%s", c.log.String())
	}
}

// syncBuffer is the console's output, written by exec's copier and read
// by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeCerts makes the table's TLS files for Mosquitto's TLS listeners:
// a CA and the table's certificate it signs.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tablectl test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "table-bac-07"}, DNSNames: []string{"table-bac-07", "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, b := range map[string]*pem.Block{"ca.crt": {Type: "CERTIFICATE", Bytes: caDER}, "table.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"table.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
