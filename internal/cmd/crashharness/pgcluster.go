package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is a private PostgreSQL cluster for one run: its own directory,
// a free port on 127.0.0.1 and trust authentication, stopped and removed
// at the end. It is never the machine's own cluster (port 5432), which
// other work uses: the harness neither stops nor restarts that one.
type cluster struct {
	bin  string   // the directory of initdb, pg_ctl and postgres
	as   []string // the command prefix that runs them as postgres (runuser, when root)
	dir  string   // owned by the user the cluster runs as
	data string   // dir/data
	log  string   // dir/postgres.log
	port int
}

// pgBinDir returns the directory of PostgreSQL's server binaries: the
// newest of Debian's /usr/lib/postgresql/<version>/bin, else the one of
// pg_ctl on PATH.
func pgBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries: install Debian's postgresql (its binaries are in /usr/lib/postgresql/<version>/bin)")
}

// startCluster creates a cluster in a new temporary directory and starts
// it. As root, the cluster belongs to the user postgres (initdb refuses
// to run as root) and its commands run through runuser.
func startCluster(ctx context.Context) (*cluster, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "crashharness-pg-")
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, the cluster must belong to the user postgres (initdb refuses root): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c.as = []string{"runuser", "-u", "postgres", "--"}
	}
	if err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		c.destroy()
		return nil, err
	}
	// A free port on loopback; should another process take it before
	// PostgreSQL does, try another.
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			c.destroy()
			return nil, err
		}
		conf := fmt.Sprintf("\n# crashharness\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 100\nshared_buffers = 32MB\nfsync = on\n", c.port, c.dir)
		if err := appendFile(filepath.Join(c.data, "postgresql.conf"), conf); err != nil {
			c.destroy()
			return nil, err
		}
		if err = c.start(ctx); err == nil {
			return c, nil
		}
		if attempt == 2 {
			err = fmt.Errorf("%w\n%s", err, c.lastLog(20))
			c.destroy()
			return nil, err
		}
	}
}

// freePort returns a port of 127.0.0.1 that nothing listens on now, and
// never 5432.
func freePort() (int, error) {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port != 5432 {
			return port, nil
		}
	}
}

func appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// dsn returns the cluster's connection string.
func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// run runs one of the cluster's programs, as its user, within a minute.
func (c *cluster) run(ctx context.Context, prog string, args ...string) error {
	_, err := c.output(ctx, prog, args...)
	return err
}

// output runs one of the cluster's programs, as its user, within a
// minute, and returns what it wrote to stdout.
func (c *cluster) output(ctx context.Context, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	argv := append(slices.Clone(c.as), filepath.Join(c.bin, prog))
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = c.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// pgCtlWait is how long pg_ctl waits for a start or a stop (its -t); a
// context given to pg_ctl must last longer, or it cuts pg_ctl short before
// pg_ctl says why it gave up.
const pgCtlWait = 50 * time.Second

// pgCtlWaitArg is pgCtlWait as pg_ctl's -t takes it, in seconds.
var pgCtlWaitArg = strconv.Itoa(int(pgCtlWait / time.Second))

// start starts the cluster and waits until it accepts connections.
func (c *cluster) start(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "start", "-D", c.data, "-l", c.log, "-w", "-t", pgCtlWaitArg, "-s")
}

// stop stops the cluster with mode (smart, fast or immediate) and waits
// until it is down.
func (c *cluster) stop(ctx context.Context, mode string) error {
	return c.run(ctx, "pg_ctl", "stop", "-D", c.data, "-m", mode, "-w", "-t", pgCtlWaitArg, "-s")
}

// restart stops the cluster with mode and starts it again at once.
func (c *cluster) restart(ctx context.Context, mode string) error {
	return c.run(ctx, "pg_ctl", "restart", "-D", c.data, "-m", mode, "-l", c.log, "-w", "-t", pgCtlWaitArg, "-s")
}

// up returns when the harness first connected and ran a query, trying
// every 10 ms until ctx ends.
func (c *cluster) up(ctx context.Context) (time.Time, error) {
	for !c.answers(ctx) {
		if !pause(ctx, 10*time.Millisecond) {
			return time.Time{}, fmt.Errorf("PostgreSQL did not accept connections again: %w", ctx.Err())
		}
	}
	return time.Now(), nil
}

// answers reports whether the cluster accepts a connection and answers a
// query within a second.
func (c *cluster) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn())
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one) == nil
}

// lastLog returns the last n lines of the cluster's log.
func (c *cluster) lastLog(n int) string {
	b, _ := os.ReadFile(c.log)
	return lastLines(string(b), n)
}

// destroy stops the cluster at once, when it runs, and removes its
// directory. Should pg_ctl fail, it sends SIGQUIT (an immediate
// shutdown) to the postmaster named in the cluster's own postmaster.pid:
// only the process this run started.
func (c *cluster) destroy() {
	pidFile := filepath.Join(c.data, "postmaster.pid")
	// A start cut short by a signal may have forked a postmaster that has
	// not written its pid file yet: give it a moment.
	for i := 0; i < 10; i++ {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(pidFile); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), pgCtlWait+10*time.Second) // pg_ctl gives up first
		if err := c.stop(ctx, "immediate"); err != nil {
			fmt.Fprintln(os.Stderr, "crashharness: stop the PostgreSQL cluster:", err)
			if b, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])); err == nil && pid > 1 {
					syscall.Kill(pid, syscall.SIGQUIT)
					time.Sleep(time.Second)
				}
			}
		}
		cancel()
	}
	os.RemoveAll(c.dir)
}
