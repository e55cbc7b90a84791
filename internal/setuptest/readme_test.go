package setuptest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/testenv"
)

// readmeCommands is every command README.md prints for a reader to run:
// each line of a fenced block, and each inline code span that starts the
// way a Go command does (go run, go build, go test; `.ci/packages` inline
// is a file named, not a command).
// Synopses in the command list (`tablectl odds --decks 6|8 ...`) are not
// commands to paste and are left out.
func readmeCommands(text string) []string {
	var out []string
	inBlock := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			for _, start := range []string{"go run ", "go build ", "go test "} {
				if strings.HasPrefix(m[1], start) {
					out = append(out, m[1])
				}
			}
		}
	}
	return out
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// readmeRunner runs one kind of README command, as printed, in the
// checkout, and checks it did what README says. env is the environment
// every command gets (HOME a folder of the test's).
type readmeRunner struct {
	name    string // the subtest's
	pattern *regexp.Regexp
	run     func(t *testing.T, r, cmd string, env []string)
}

var readmeRunners = []readmeRunner{
	{"ci", regexp.MustCompile(`^\.ci/test$`), checkCIRunsTest},
	{"short-suite", regexp.MustCompile(`^go test -short \./\.\.\.$`), runLaptopSuite},
	{"demo", regexp.MustCompile(`^go run \./cmd/tablectl demo$`), runTableDemo},
	{"floor-demo", regexp.MustCompile(`^go run \./cmd/tablectl(-floor)? demo --tables \d+$`), runFloorDemo},
	{"build-key", regexp.MustCompile(`^go run \./cmd/tablectl audit keygen --out \S+$`), runBuildKeygen},
	{"package", regexp.MustCompile(`^go run \./cmd/tablectl-pkg --manifest-key \S+$`), runPackage},
	{"bench", regexp.MustCompile(`^go build -o bin/ \./cmd/\.\.\. && bin/tablectl-bench --quick$`), runBenchQuick},
}

// TestREADMECommandsKnown: every command README prints has a runner here,
// and every runner a command in README (a README edit that adds a command
// adds its run, a removed one takes its run along). Short: it runs nothing.
func TestREADMECommandsKnown(t *testing.T) {
	cmds := readmeCommands(readREADME(t))
	if len(cmds) < 5 {
		t.Fatalf("found only %d commands in README.md: %q", len(cmds), cmds)
	}
	used := make([]bool, len(readmeRunners))
	for _, c := range cmds {
		i := runnerFor(c)
		if i < 0 {
			t.Errorf("README.md prints %q, which no test runs (add a runner to readmeRunners)", c)
			continue
		}
		used[i] = true
	}
	for i, u := range used {
		if !u {
			t.Errorf("runner %s matches no command in README.md", readmeRunners[i].pattern)
		}
	}
}

func TestReadmeCommandsParse(t *testing.T) {
	got := readmeCommands("text `go run ./cmd/x a` and `tablectl odds --decks 6|8`\n```\ngo run ./cmd/tablectl demo\n\n# comment\n.ci/test\n```\n`.ci/packages` `go test -short ./...`\n")
	want := []string{"go run ./cmd/x a", "go run ./cmd/tablectl demo", ".ci/test", "go test -short ./..."}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestREADMECommands runs every command README.md prints, as printed, in
// README's order, from the checkout's root with a HOME of its own: a
// newcomer's first hour.
func TestREADMECommands(t *testing.T) {
	testenv.Long(t, "every command README.md prints, run as printed (the demos, the packages, the bench, the short suite)")
	r := root(t)
	// A HOME of the test's own (the build key goes there), but Go's
	// caches where they are: a newcomer's HOME holds theirs.
	goEnv, err := exec.Command("go", "env", "GOPATH", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	caches := strings.Fields(string(goEnv))
	if len(caches) != 3 {
		t.Fatalf("go env printed %q", goEnv)
	}
	env := append(os.Environ(), "HOME="+t.TempDir(), "GOPATH="+caches[0], "GOMODCACHE="+caches[1], "GOCACHE="+caches[2])
	// What the commands write into the checkout (the demo's trail, the
	// packages, the bench's binaries) is put back as it was.
	for _, d := range []string{"demo", "dist", "bin"} {
		keepAside(t, filepath.Join(r, d))
	}
	done := map[string]bool{}
	for _, c := range readmeCommands(readREADME(t)) {
		if done[c] {
			continue
		}
		done[c] = true
		i := runnerFor(c)
		if i < 0 {
			t.Errorf("no runner for %q", c)
			continue
		}
		t.Run(readmeRunners[i].name, func(t *testing.T) {
			t.Logf("%s", c)
			readmeRunners[i].run(t, r, c, env)
		})
	}
}

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func runnerFor(cmd string) int {
	for i, r := range readmeRunners {
		if r.pattern.MatchString(cmd) {
			return i
		}
	}
	return -1
}

// keepAside moves path out of the way for the test and puts it back after.
func keepAside(t *testing.T, path string) {
	t.Helper()
	kept := path + ".readme-test-kept"
	if _, err := os.Lstat(path); err == nil {
		if err := os.Rename(path, kept); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		os.RemoveAll(path)
		if _, err := os.Lstat(kept); err == nil {
			if err := os.Rename(kept, path); err != nil {
				t.Errorf("put %s back: %v", path, err)
			}
		}
	})
}

// shell is one README command run by sh in the checkout, in a process
// group of its own (Ctrl-C reaches the whole group, as in a terminal).
func shell(ctx context.Context, r, cmd string, env []string) *exec.Cmd {
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Dir = r
	c.Env = env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	return c
}

// runToEnd runs a README command to its end and returns its output.
func runToEnd(t *testing.T, r, cmd string, env []string, limit time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := shell(ctx, r, cmd, env).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, logtail.Lines(string(out), 60))
	}
	return string(out)
}

// checkCIRunsTest: .ci/test is the command this suite runs under, so it is
// not run again here; what is checked is that CI runs exactly it, and
// installs nothing of its own.
func checkCIRunsTest(t *testing.T, r, cmd string, _ []string) {
	b, err := os.ReadFile(filepath.Join(r, ".ci/run"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	want := []string{"set -euo pipefail", `cd "$(dirname "$0")/.."`, "exec " + cmd}
	if !slices.Equal(lines, want) {
		t.Errorf(".ci/run runs %q, want exactly %q", lines, want)
	}
}

// runLaptopSuite runs `go test -short ./...` as on a laptop with none of
// the outside parts: in a network namespace of its own (no Mosquitto, no
// PostgreSQL, no NATS, no module proxy), with PATH holding none of the
// commands .ci/packages installs but the compiler and git, and without
// TABLECTL_TEST_ALL. It must pass, skipping what it cannot run.
func runLaptopSuite(t *testing.T, r, cmd string, env []string) {
	testenv.Root(t, "to run the short suite in a network namespace of its own")
	unshare := testenv.Command(t, "unshare", "util-linux")
	ip := testenv.Command(t, "ip", "iproute2")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := laptopPath(t, readPackages(t))
	var laptop []string
	for _, e := range env {
		if name, _, _ := strings.Cut(e, "="); slices.Contains([]string{"PATH", testenv.AllEnv, "TABLECTL_NATS_SERVER", "GOPROXY", "GOFLAGS"}, name) {
			continue
		}
		laptop = append(laptop, e)
	}
	laptop = append(laptop, "PATH="+filepath.Dir(goBin)+":"+bin, "GOPROXY=off", "GOFLAGS=-mod=readonly")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, unshare, "--net", "--", "/bin/sh", "-c", ip+` link set lo up && exec sh -c "$0"`, cmd)
	c.Dir, c.Env = r, laptop
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s on a laptop (no services, none of .ci/packages' commands): %v\n%s", cmd, err, logtail.Lines(string(out), 80))
	}
	if !strings.Contains(string(out), "ok  \tgithub.com/tablectl/tablectl/coup") {
		t.Errorf("the short suite's output lacks coup's line:\n%s", logtail.Lines(string(out), 40))
	}
}

// laptopPath is a folder of links to every command on this machine's PATH
// but those .ci/packages installs; the compiler, git and the certificates
// a Go developer has stay.
func laptopPath(t *testing.T, l packageList) string {
	t.Helper()
	hidden := map[string]bool{}
	for _, pkg := range l.names {
		if slices.Contains([]string{"gcc", "git", "ca-certificates"}, pkg) {
			continue
		}
		for _, thing := range l.things[pkg] {
			if !strings.HasPrefix(thing, "/") {
				hidden[thing] = true
			}
		}
	}
	bin := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if hidden[e.Name()] {
				continue
			}
			link := filepath.Join(bin, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // the first on PATH wins, as in a shell
			}
			if err := os.Symlink(filepath.Join(d, e.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return bin
}

// demoRun is a README demo running until it is interrupted.
type demoRun struct {
	cmd    *exec.Cmd
	log    logtail.Buffer
	lines  chan string
	exited chan error
	done   chan struct{} // closed once the process is waited for
}

func startDemo(t *testing.T, r, cmd string, env []string) *demoRun {
	t.Helper()
	d := &demoRun{lines: make(chan string, 1024), exited: make(chan error, 1), done: make(chan struct{})}
	// exec: in a terminal Ctrl-C reaches the command while the user's
	// interactive shell ignores it; a non-interactive sh would die of it.
	d.cmd = shell(context.Background(), r, "exec "+cmd, env)
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.log.Write([]byte(sc.Text() + "\n"))
			select {
			case d.lines <- sc.Text():
			default:
			}
		}
		close(d.lines)
	}()
	go func() {
		err := d.cmd.Wait()
		pw.Close()
		d.exited <- err
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
	})
	return d
}

// await returns the first line the demo prints that holds want, failing
// when the demo ends or limit passes first.
func (d *demoRun) await(t *testing.T, want string, limit time.Duration) string {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				t.Fatalf("the demo ended before printing %q:\n%s", want, d.log.String())
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q from the demo after %s:\n%s", want, limit, d.log.String())
		}
	}
}

// interrupt is Ctrl-C: SIGINT to the demo's process group; it must stop
// within a minute, cleanly. `go run` itself exits 1 when it was
// interrupted, whatever the program did (it prints "exit status N" only
// when the program failed): the program's clean stop is what it says
// last, stopped.
func (d *demoRun) interrupt(t *testing.T, stopped string) {
	t.Helper()
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && !strings.Contains(d.log.String(), "exit status")) {
			t.Fatalf("after Ctrl-C the demo exited %v:\n%s", err, logtail.Lines(d.log.String(), 40))
		}
		// The reader may still hold the last lines.
		for range d.lines {
		}
		if !strings.Contains(d.log.String(), stopped) {
			t.Fatalf("after Ctrl-C the demo did not say %q:\n%s", stopped, logtail.Lines(d.log.String(), 40))
		}
	case <-time.After(time.Minute):
		t.Fatalf("the demo did not stop within a minute of Ctrl-C:\n%s", logtail.Lines(d.log.String(), 40))
	}
}

var urlIn = regexp.MustCompile(`https?://127\.0\.0\.1:\d+/`)

// reachable fetches url and fails unless something serves it (a login
// asked for counts: the page is there behind its login).
func reachable(t *testing.T, url string) {
	t.Helper()
	get(t, &http.Client{Timeout: 10 * time.Second}, url)
}

// reachableTLS is reachable over HTTPS, trusting only the CA in caFile
// (the floor demo's own).
func reachableTLS(t *testing.T, url, caFile string) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	get(t, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}, url)
}

func get(t *testing.T, c *http.Client, url string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
}

// runTableDemo: the demo prints where to look; the web display answers at
// the address it gives; the supervisor commands its banner offers to try
// work as printed; Ctrl-C stops it cleanly.
func runTableDemo(t *testing.T, r, cmd string, env []string) {
	d := startDemo(t, r, cmd, env)
	url := urlIn.FindString(d.await(t, "web display", 10*time.Minute))
	if url == "" {
		t.Fatalf("the banner's web display line has no address:\n%s", d.log.String())
	}
	d.await(t, "Ctrl-C", time.Minute)
	reachable(t, url)
	reachable(t, url+"health")
	var tries []string
	for _, l := range strings.Split(d.log.String(), "\n") {
		if i := strings.Index(l, "go run ./cmd/tablectl "); i >= 0 {
			tries = append(tries, strings.TrimSpace(l[i:]))
		}
	}
	if len(tries) == 0 {
		t.Errorf("the banner offers no supervisor command to try:\n%s", d.log.String())
	}
	for _, try := range tries {
		out := runToEnd(t, r, try, env, 3*time.Minute)
		t.Logf("%s:\n%s", try, out)
	}
	d.interrupt(t, "stopped; the trail is")
}

// runFloorDemo: the floor demo prints its floor view's address, which
// answers (behind its login), and Ctrl-C stops it cleanly.
func runFloorDemo(t *testing.T, r, cmd string, env []string) {
	d := startDemo(t, r, cmd, env)
	url := urlIn.FindString(d.await(t, "floor view", 10*time.Minute))
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the banner's floor view line has no HTTPS address:\n%s", d.log.String())
	}
	ca := strings.Fields(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d.await(t, "floor CA", time.Minute)), "floor CA")))
	if len(ca) == 0 {
		t.Fatalf("the banner's floor CA line names no file:\n%s", d.log.String())
	}
	reachableTLS(t, url, ca[0])
	d.interrupt(t, "stopped;")
}

// runBuildKeygen: the build key is made where README says, its folder
// made too.
func runBuildKeygen(t *testing.T, r, cmd string, env []string) {
	dir := expandHome(strings.Fields(cmd)[len(strings.Fields(cmd))-1], env)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is there before the command: the test would not show the folder made", dir)
	}
	runToEnd(t, r, cmd, env, 5*time.Minute)
	for _, f := range []string{"checkpoint.key", "checkpoint.pub"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after %s: %v", cmd, err)
		}
	}
}

// runPackage: both packages (the table box's and the floor's), each for both
// architectures, land in dist/.
func runPackage(t *testing.T, r, cmd string, env []string) {
	// Four packages: two binaries, each for two arches (cgo cross-built).
	runToEnd(t, r, cmd, env, 30*time.Minute)
	// The table box's package and the floor's, for each arch.
	for _, pkg := range []string{"tablectl", "tablectl-floor"} {
		for _, arch := range []string{"amd64", "arm64"} {
			m, err := filepath.Glob(filepath.Join(r, "dist", pkg+"_*_"+arch+".deb"))
			if err != nil || len(m) == 0 {
				t.Errorf("no %s package for %s in dist/ after %s (%v)", pkg, arch, cmd, err)
			}
		}
	}
}

// runBenchQuick: the bench prints its table.
func runBenchQuick(t *testing.T, r, cmd string, env []string) {
	testenv.Command(t, "mosquitto", "mosquitto") // the bench starts its own
	out := runToEnd(t, r, cmd, env, 20*time.Minute)
	for _, want := range []string{"| what | result | goal | pass/fail |", "Audit verify"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s printed no %q:\n%s", cmd, want, logtail.Lines(out, 40))
		}
	}
}

func expandHome(path string, env []string) string {
	if !strings.HasPrefix(path, "~/") {
		return path
	}
	// The last HOME counts, as os/exec passes it on.
	for i := len(env) - 1; i >= 0; i-- {
		if h, ok := strings.CutPrefix(env[i], "HOME="); ok {
			return filepath.Join(h, path[2:])
		}
	}
	return path
}
