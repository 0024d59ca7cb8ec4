// Command sseconsumer reads the task event stream of a lifecycle server and
// prints each event once, with the Go client (package client), which does
// what a robust consumer must:
//
//   - it resumes after every disconnect with Last-Event-ID, waiting the
//     retry delay the server asks for;
//   - it deduplicates on the event id, as delivery is at least once;
//   - on 410 cursor_expired it says that events may have been missed and
//     goes on from the live tail; on 429 it waits Retry-After.
//
// This program adds a cursor kept in a file (-state), so that a restart
// resumes too.
//
// The API key comes from $KEY (as the demo's -background exports it);
// -key also takes one, but a command line shows in ps.
//
//	go run ./examples/sseconsumer -url "$BASE"
//	go run ./examples/sseconsumer -url "$BASE" -types task.updated,task.shipped -state lifecycle-demo-data/sseconsumer.cursor
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/client"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "base URL of the lifecycle API (where the server mounts it)")
	key := flag.String("key", os.Getenv("KEY"), "API key with scope events:read (default $KEY, which ps does not show)")
	types := flag.String("types", "", "comma-separated event types to receive (default all)")
	task := flag.String("task", "", "receive only the events of this task ID")
	state := flag.String("state", "", "file that keeps the last event id, to resume after a restart")
	flag.Parse()
	if *key == "" {
		log.Fatal("sseconsumer: give an API key with -key or $KEY")
	}
	c, err := client.New(client.Config{BaseURL: *base, APIKey: *key})
	if err != nil {
		log.Fatalf("sseconsumer: %v", err)
	}
	p := client.StreamParams{TaskID: *task}
	for _, t := range strings.Split(*types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			p.EventTypes = append(p.EventTypes, lifecycle.EventType(t))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err = consume(ctx, c, p, *state, func(ev lifecycle.Event) {
		var data struct {
			TaskIdentifier string `json:"taskIdentifier"`
			Summary        string `json:"summary"`
		}
		json.Unmarshal(ev.Data, &data)
		fmt.Printf("%s %-18s #%d %s: %s\n", ev.ID, ev.Type, ev.Sequence, data.TaskIdentifier, data.Summary)
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatalf("sseconsumer: %v", err)
	}
}

// consume hands every new event to handle until ctx is done or the server
// refuses the stream for good. With a state file, it starts after the
// event the file names and keeps the file up to date.
func consume(ctx context.Context, c *client.Client, p client.StreamParams, state string, handle func(lifecycle.Event)) error {
	if state != "" {
		if b, err := os.ReadFile(state); err == nil {
			p.LastEventID = strings.TrimSpace(string(b))
		}
	}
	stream := c.Events(ctx, p)
	defer stream.Close()
	for {
		ev, err := stream.Next()
		var gap *client.GapError
		switch {
		case errors.As(err, &gap):
			log.Printf("stream: %v; events in between may be missed: re-read tasks from the API", gap)
			continue
		case err != nil:
			return err
		}
		handle(ev)
		if state != "" {
			save(state, stream.LastEventID())
		}
	}
}

// save replaces the state file atomically.
func save(state, lastID string) {
	tmp := state + ".tmp"
	if err := os.WriteFile(tmp, []byte(lastID+"\n"), 0o600); err == nil {
		os.Rename(tmp, state)
	}
}
