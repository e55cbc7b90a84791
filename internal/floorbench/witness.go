package floorbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/logtail"
)

// witnessEnv carries a witness process's spec: the bench binary run again
// with it set is a witness (ServeWitness), so its CPU and memory are its
// own in /proc, not the simulated tables'.
const witnessEnv = "TABLECTL_BENCH_FLOOR_WITNESS"

// witnessSpec is what a witness process runs: floor.New's settings.
type witnessSpec struct {
	Name, NATS, Stream, Consumer, StatusStream, Root string
	Postgres, Schema, Registry                       string
	Replicas                                         int
}

// ServeWitness runs this process as a floor witness if the bench started
// it as one (witnessEnv), until its stdin ends or it is signalled, and
// exits; otherwise it returns at once. tablectl-bench's main (and its
// tests' TestMain) call it first.
func ServeWitness() {
	spec := os.Getenv(witnessEnv)
	if spec == "" {
		return
	}
	if err := serveWitness([]byte(spec)); err != nil {
		fmt.Fprintf(os.Stderr, "bench witness: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveWitness(raw []byte) error {
	var s witnessSpec
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The bench holds our stdin: when it ends, so do we.
	go func() { io.Copy(io.Discard, os.Stdin); stop() }()
	reg, err := floor.LoadRegistry(s.Registry)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, s.Postgres)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer pool.Close()
	store, err := floor.OpenStore(ctx, pool, s.Schema)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w, err := floor.New(ctx, floor.Config{Name: s.Name, NATS: s.NATS, Stream: s.Stream, Consumer: s.Consumer, StatusStream: s.StatusStream,
		Replicas: s.Replicas, Subjects: floor.Subjects{Root: s.Root}, Store: store, Registry: reg, Logger: log})
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// witnessProc is a running witness process.
type witnessProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   *logtail.Buffer
}

// startWitness runs this binary again as the witness spec says.
func startWitness(spec witnessSpec) (*witnessProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), witnessEnv+"="+string(raw))
	p := &witnessProc{cmd: cmd, log: &logtail.Buffer{Keep: 64 << 10}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("witness process: %w", err)
	}
	return p, nil
}

// kill ends the witness at once (an outage: SIGKILL, nothing flushed).
func (p *witnessProc) kill() {
	p.cmd.Process.Kill()
	p.stdin.Close()
	p.cmd.Wait()
}

func (p *witnessProc) pid() int { return p.cmd.Process.Pid }
