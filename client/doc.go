// Package client is a Go client of the HTTP API that [lifecycle.Service]
// serves, for agents, reviewers, CI jobs and tools that talk to a lifecycle
// server over the network.
//
// A program that builds a client and reads a task, run against the local
// demo (eval "$(go run ./examples/demo -background)" exports BASE and KEY):
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//		"os"
//		"time"
//
//		"github.com/tasklifecycle/lifecycle"
//		"github.com/tasklifecycle/lifecycle/client"
//	)
//
//	func main() {
//		c, err := client.New(client.Config{BaseURL: os.Getenv("BASE"), APIKey: os.Getenv("KEY")})
//		if err != nil {
//			log.Fatal(err)
//		}
//		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//		defer cancel()
//		list, err := c.ListTasks(ctx, lifecycle.ListTasksParams{Limit: 1})
//		if err != nil {
//			log.Fatal(err) // an *Error: its Code says what the server refused
//		}
//		for _, t := range list.Tasks {
//			task, err := c.Task(ctx, t.ID)
//			if err != nil {
//				log.Fatal(err)
//			}
//			fmt.Println(task.Identifier, task.Status, task.AvailableActions)
//		}
//	}
//
// A [Client] has one typed method per endpoint; requests and results are the
// types of package lifecycle (a [lifecycle.Task], a [lifecycle.Submission],
// ...), so what the server encodes is what the client decodes.
//
// # Errors
//
// Every answer that is not a success comes back as an [*Error] carrying the
// status, the stable code, the message and the details of the server's error
// body (the invalid fields, the conflict's reason and the task's available
// actions). Use errors.As to read it, or errors.Is with the sentinels of
// package lifecycle ([lifecycle.ErrNotFound], [lifecycle.ErrConflict], ...).
//
// # Retries and idempotency
//
// Calls that can be repeated safely are retried on a transport error, 429,
// 500, 502, 503 and 504 (and on 409 request_in_progress, while an earlier
// attempt with the same key still runs), with exponential backoff and
// jitter, honouring Retry-After, up to [Config.MaxRetries] times: reads,
// deletes, and the calls that take an Idempotency-Key (submit, ship,
// creating a subscription). The client gives each of the
// latter a fresh random key, or the one set with [WithIdempotencyKey], and
// sends the same key on every retry, so a retry after a lost answer gets the
// first answer replayed instead of doing the work twice. Other calls (create,
// start, cancel, review, ...) are sent once.
//
// # Event stream
//
// [Client.Events] reads GET /task-events/stream. The [Stream] resumes after
// every disconnect with Last-Event-ID, waiting the delay the server's retry:
// field asks for, drops events it has already returned (delivery is at least
// once), and when the server answers 410 cursor_expired it returns a
// [*GapError] once, saying events may be missing, and goes on from the live
// tail.
package client
