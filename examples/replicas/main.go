// Command replicas runs several replicas of one lifecycle Service, each a
// process of its own, on one PostgreSQL database (package store/postgres):
// a task created on one replica shows on the event stream of another at
// once, and the ship operations and webhook deliveries of a replica that
// dies are taken over by the others.
//
//	go run ./examples/replicas                # starts replicas a, b and c on 127.0.0.1:8090-8092
//	go run ./examples/replicas -smoke         # the same on free ports and a scratch schema, then exits
//	LIFECYCLE_ADMIN_KEY=lsk_... go run ./examples/replicas -replica a -data DIR   # one replica, as a deployment runs it
//
// Without -replica, the command starts -n replicas as child processes of
// itself, opens the event stream of the first, creates a task on each of
// the others, and prints the events the first one streams. The replicas
// share the database (-postgres, default LIFECYCLE_POSTGRES_DSN or the
// local server), a schema in it (-schema), and a data directory (-data)
// holding the local git repositories that stand in for the code host and
// the log of deployments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var (
		r replicaOptions
		l launchOptions
	)
	flag.StringVar(&r.name, "replica", "", "run one replica with this instance ID, instead of starting -n of them")
	flag.StringVar(&r.addr, "addr", "127.0.0.1:8090", "address the replica listens on (with -replica)")
	flag.StringVar(&r.dsn, "postgres", "", "the PostgreSQL database the replicas share; default LIFECYCLE_POSTGRES_DSN, else the local server (a DSN with a password belongs in LIFECYCLE_POSTGRES_DSN: ps shows a command line)")
	flag.StringVar(&r.schema, "schema", "replicas", "the schema of the replicas' tables, created when missing")
	flag.StringVar(&r.data, "data", "lifecycle-replicas-data", "the data directory the replicas share: git repositories and the deployment log")
	r.adminKey = os.Getenv("LIFECYCLE_ADMIN_KEY") // never a flag: a command line shows in ps
	flag.StringVar(&r.webhookCA, "webhook-ca", "", "PEM file of certificates to trust for webhook receivers (with -replica)")
	flag.DurationVar(&r.shipLease, "ship-lease", 0, "how long a replica holds a ship operation unless it renews it; default 30s, at least 3s")
	flag.DurationVar(&r.webhookLease, "webhook-lease", 0, "how long a replica holds the webhook subscriptions it delivers for unless it renews them; default 30s")
	flag.DurationVar(&r.deployTime, "deploy-time", 0, "how long each deployment takes, to watch a replica's running ship operations taken over after it is killed")
	flag.IntVar(&l.n, "n", 3, "how many replicas to start")
	flag.BoolVar(&l.smoke, "smoke", false, "use free ports, a scratch schema and data directory, show the events, stop the replicas and exit")
	flag.Parse()
	if r.dsn == "" {
		r.dsn = os.Getenv("LIFECYCLE_POSTGRES_DSN")
	}
	if r.dsn == "" {
		r.dsn = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if r.name != "" {
		err = runReplica(ctx, r, os.Stdout, os.Stderr)
	} else {
		l.replica = r
		err = launch(ctx, l, os.Stdout)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatalf("replicas: %v", err)
	}
}

// launchOptions configure the launcher.
type launchOptions struct {
	n       int
	smoke   bool
	replica replicaOptions // what the replicas share
}

// launch starts the replicas, shows an event created on each of them on
// the stream of the first, and then serves until ctx ends (or, with
// smoke, returns).
func launch(ctx context.Context, o launchOptions, stdout *os.File) error {
	if o.n < 2 {
		return errors.New("-n must be at least 2")
	}
	if err := ping(ctx, o.replica.dsn); err != nil {
		if o.smoke && os.Getenv("CI") != "true" {
			fmt.Fprintf(stdout, "replicas: skipped, no PostgreSQL server answers (%v): start one, or set -postgres\n", err)
			return nil
		}
		return fmt.Errorf("no PostgreSQL server answers: %w; start one, or set -postgres (or LIFECYCLE_POSTGRES_DSN)", err)
	}
	common := o.replica
	if common.adminKey == "" {
		common.adminKey = newAdminKey()
	}
	if o.smoke {
		dir, err := os.MkdirTemp("", "lifecycle-replicas-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		common.data = dir
		common.schema = fmt.Sprintf("replicas_smoke_%d", os.Getpid())
		defer dropSchema(context.WithoutCancel(ctx), common.dsn, common.schema)
	}
	if err := os.MkdirAll(common.data, 0o700); err != nil {
		return err
	}

	var procs []*replicaProc
	defer func() {
		for _, p := range procs {
			p.stop(10 * time.Second)
		}
	}()
	for i := range o.n {
		r := common
		r.name = string(rune('a' + i))
		r.addr = fmt.Sprintf("127.0.0.1:%d", 8090+i)
		if o.smoke {
			r.addr = freeAddr()
		}
		p, err := startReplica(r)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.waitReady(60 * time.Second); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "replica %s (pid %d) serving on %s; log %s\n", p.name, p.cmd.Process.Pid, p.base, p.logPath)
	}

	c := &client{key: common.adminKey}
	stream, err := c.stream(ctx, procs[0].base)
	if err != nil {
		return err
	}
	defer stream.Close()
	created := map[string]string{} // task ID -> replica
	for _, p := range procs[1:] {
		id, err := c.createTask(ctx, p.base, "RPL-"+p.name+fmt.Sprint(time.Now().Unix()), "Created on replica "+p.name)
		if err != nil {
			return err
		}
		created[id] = p.name
	}
	timeout := time.After(20 * time.Second)
	for len(created) > 0 {
		select {
		case f, ok := <-stream.frames:
			if !ok {
				return errors.New("the stream ended")
			}
			if by, ok := created[f.taskID]; ok {
				fmt.Fprintf(stdout, "stream of %s: %s %s of %s, created on %s, %s after the creation returned\n",
					procs[0].name, f.typ, f.id, f.taskID, by, f.at.Sub(c.created[f.taskID]).Round(time.Millisecond))
				delete(created, f.taskID)
			}
		case <-timeout:
			return fmt.Errorf("the stream of %s did not show the tasks created on the others within 20s", procs[0].name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if o.smoke {
		fmt.Fprintln(stdout, "replicas: the first replica streamed the tasks created on the others")
		return nil
	}
	fmt.Fprintf(stdout, "\nin another shell:\n  export KEY=%s\n  curl -sN -H \"Authorization: Bearer $KEY\" %s/task-events/stream\n", common.adminKey, procs[0].base)
	fmt.Fprintf(stdout, "  curl -s -X POST -H \"Authorization: Bearer $KEY\" %s/tasks -d '{\"identifier\": \"WEB-1\", \"title\": \"Hello\", \"links\": {\"issue\": \"https://issues.example.com/WEB-1\"}}'\n", procs[1].base)
	fmt.Fprintln(stdout, "\nCtrl-C stops every replica.")
	<-ctx.Done()
	return nil
}
