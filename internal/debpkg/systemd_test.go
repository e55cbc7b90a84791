package debpkg

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/testenv"
)

// TestPackagedInstallSystemd is the install an operator does, on a Debian
// 12 system with systemd as PID 1 (systemd-nspawn --boot on a debootstrap
// tree, built by .ci/debian-tree and cached under /var/cache/tablectl-ci)
// and Debian's stock Mosquitto: dpkg -i the .deb, tablectl init, the
// shipped Mosquitto snippet in conf.d beside the stock mosquitto.conf,
// start the service, deal from a simulated shoe on a pseudo-terminal, see
// the table on MQTT, restart the service and then the whole container, and
// verify the trail with the checkpoint public key.
func TestPackagedInstallSystemd(t *testing.T) {
	testenv.Long(t, "the packaged install under systemd-nspawn")
	testenv.Root(t, "to boot a container with systemd-nspawn")
	nspawn := testenv.Command(t, "systemd-nspawn", "systemd-container")
	testenv.Command(t, "debootstrap", "debootstrap")
	testenv.Command(t, "nsenter", "util-linux")
	r := root(t)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Built when missing (debootstrap from deb.debian.org, about 1.5 min),
	// else the cached one.
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
	tree := strings.TrimSpace(string(treeOut))
	deb, err := Build(ctx, Options{Root: r, Arch: runtime.GOARCH, Version: "0.0.1", Out: t.TempDir(), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}

	// A copy of the cached tree: the box, kept across its restarts.
	// Kept after a failure, for its journal (journalctl -D BOX/var/log/journal).
	boxDir, err := os.MkdirTemp("", "tablectl-box-")
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
	if out := sh("stat -c '%U:%G %a %n' /etc/tablectl/keys/checkpoint.key /etc/tablectl/mqtt.password /etc/tablectl/supervisors.json /etc/mosquitto/tablectl.passwd /root/tablectl-handoff/alice.martin.key"); out !=
		"root:tablectl 640 /etc/tablectl/keys/checkpoint.key\nroot:tablectl 640 /etc/tablectl/mqtt.password\nroot:tablectl 640 /etc/tablectl/supervisors.json\nmosquitto:mosquitto 600 /etc/mosquitto/tablectl.passwd\nroot:root 600 /root/tablectl-handoff/alice.martin.key\n" {
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
	// unit's device policy must let in, as it lets in ttyUSB.
	sh(`sed -i 's#"/dev/tablectl-shoe"#"/run/tablectl-sim/shoe"#' /etc/tablectl/tablectl.json &&
		mkdir -p /etc/systemd/system/tablectl.service.d && printf '[Service]\nDeviceAllow=char-pts rw\n' > /etc/systemd/system/tablectl.service.d/simulated-shoe.conf &&
		systemctl daemon-reload`)
	const sim = "systemd-run --uid=tablectl --gid=tablectl -p RuntimeDirectory=tablectl-sim "
	const simArgs = "/usr/bin/tablectl shoe-sim --link /run/tablectl-sim/shoe --pace 20ms --coup-pace 3500ms --exit "
	if out := sh("tablectl config check /etc/tablectl/tablectl.json; echo rc=$?"); !strings.Contains(out, "rc=0") {
		t.Errorf("config check: %s", out)
	}
	// The controller first: it waits for the shoe's port. The dealer's
	// pace leaves the result its 3 s (table.result_time) between coups.
	sh("systemctl start tablectl")
	c.waitFor("the service", "systemctl is-active tablectl")
	sh(sim + "--unit=shoe-sim " + simArgs + "--seed 15 --coups 4")
	pit := "mosquitto_sub -h 127.0.0.1 -u pit-BAC-07 -P \"$(cat /etc/tablectl/pit-BAC-07.password)\" "
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
	// The hardening as the installed, running unit has it (docs/operations.md).
	sec := sh("systemd-analyze security tablectl --no-pager | tail -1")
	t.Logf("systemd-analyze security tablectl: %s", strings.TrimSpace(sec))
	if !strings.Contains(sec, "Overall exposure level for tablectl.service: 1.") {
		t.Errorf("exposure: %s", sec)
	}

	// Restart the service, then the box.
	sh("systemctl stop shoe-sim; systemctl restart tablectl")
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

	// The trail verifies against the checkpoint public key init handed off,
	// and each start row names the build.
	if out := c.sh("tablectl audit verify --db /var/lib/tablectl/BAC-07.db --pubkey /etc/tablectl/keys/checkpoint.pub; echo rc=$?"); !strings.Contains(out, "rc=0") {
		t.Errorf("audit verify:\n%s", out)
	}
	starts := 0
	for _, line := range strings.Split(c.sh("tablectl audit export --db /var/lib/tablectl/BAC-07.db"), "\n") {
		if strings.Contains(line, `"ctl.start"`) {
			starts++
			if !strings.Contains(line, `"version":"0.0.1`) {
				t.Errorf("start row without the version: %s", line)
			}
		}
	}
	if starts < 3 {
		t.Errorf("%d start rows, want 3 (start, service restart, reboot)", starts)
	}
	if out := c.sh("journalctl -u tablectl --no-pager -o cat | grep 'controller running' | head -1"); !strings.Contains(out, "version=") {
		t.Errorf("start log without the version: %s", out)
	}
	c.stop()
}

// container is a booted systemd-nspawn container.
type container struct {
	t      *testing.T
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
	c := &container{t: t, cmd: cmd, log: log, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(c.stop)
	deadline := time.Now().Add(60 * time.Second)
	for c.pid1 == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the container did not start:\n%s", log.String())
		}
		select {
		case err := <-c.done:
			c.closed = true
			t.Fatalf("systemd-nspawn exited: %v\n%s", err, log.String())
		case <-time.After(100 * time.Millisecond):
		}
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		for _, f := range strings.Fields(string(kids)) {
			pid, _ := strconv.Atoi(f)
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				c.pid1 = pid
			}
		}
	}
	// Early on there is no bus yet ("offline"): ask again.
	for {
		out, _ := c.run(90*time.Second, "systemctl is-system-running --wait")
		switch s := strings.TrimSpace(out); {
		case s == "running":
			return c
		case s == "degraded":
			t.Logf("booted degraded: %s", c.try("systemctl --failed --no-pager"))
			return c
		case time.Now().After(deadline.Add(60 * time.Second)):
			t.Fatalf("boot: %s\n%s", s, c.try("systemctl --failed --no-pager"))
		}
		time.Sleep(200 * time.Millisecond)
	}
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
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := c.run(20*time.Second, script)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no %s: %v\n%s\njournal:\n%s\nconsole:\n%s", what, err, out,
				c.try("journalctl -u tablectl -u mosquitto -u shoe-sim --no-pager | tail -40"), c.console())
		}
		time.Sleep(500 * time.Millisecond)
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
