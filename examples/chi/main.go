// Command chi mounts the lifecycle API under /api/lifecycle of a
// go-chi/chi router, behind chi's request ID, logger and recoverer
// middleware, beside the host program's own routes. Event streams and the
// links in events work under the prefix: Config.BaseURL names the mount
// point, and http.StripPrefix hands the handler the paths it serves.
//
//	go run ./examples/chi                      # serves on 127.0.0.1:8081, prints an admin key
//	go run ./examples/chi -smoke               # serves on a free port, checks a round trip, exits
//
// A fresh Service has no API keys, so it answers 401 to everything: the
// host program installs the first one itself, with Service.CreateAPIKey
// (here from LIFECYCLE_ADMIN_KEY, or a new one it prints).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// prefix is where the API is mounted.
const prefix = "/api/lifecycle"

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	data := flag.String("data", "lifecycle-chi-data", "data directory (SQLite database)")
	adminKey := os.Getenv("LIFECYCLE_ADMIN_KEY") // never a flag: a command line shows in ps
	smoke := flag.Bool("smoke", false, "serve on a free port in a temporary directory, check a round trip through the router, and exit")
	flag.Parse()
	if *smoke {
		if err := smokeTest(context.Background()); err != nil {
			log.Fatalf("chi example: smoke test: %v", err)
		}
		fmt.Println("chi example: smoke test passed")
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, *data, adminKey, func(base, key string) {
		fmt.Printf("lifecycle API under %s\nadmin key: %s\n\n  curl -s -H 'Authorization: Bearer %s' %s/tasks\n", base, key, key, base)
	}); err != nil {
		log.Fatalf("chi example: %v", err)
	}
}

// serve runs the host program until ctx is done; ready is called with the
// API's base URL and the admin key once it serves.
func serve(ctx context.Context, addr, data, adminKey string, ready func(base, key string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String() + prefix

	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(data, "lifecycle.db")})
	if err != nil {
		ln.Close()
		return err
	}
	defer store.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: base, Logger: logger})
	if err != nil {
		ln.Close()
		return err
	}
	if err := svc.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	key, err := installAdminKey(ctx, svc, adminKey)
	if err != nil {
		svc.Close(context.Background())
		ln.Close()
		return err
	}

	srv := &http.Server{Handler: router(svc), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ready(base, key)
	select {
	case err := <-served:
		svc.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Streams never go idle: Service.Close ends them, beside Shutdown.
	closed := make(chan error, 1)
	go func() { closed <- svc.Close(shutdown) }()
	return errors.Join(srv.Shutdown(shutdown), <-closed)
}

// router is the host program's chi router with the API mounted under
// prefix. chi's Mount routes every path under the prefix to the handler
// but leaves the path as it is: http.StripPrefix removes the prefix
// (without a trailing slash).
func router(svc *lifecycle.Service) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Logger, middleware.Recoverer)
	r.Get("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "the host program's own page; the lifecycle API is under %s/\n", prefix)
	})
	r.Mount(prefix, http.StripPrefix(prefix, svc.Handler()))
	return r
}

// installAdminKey installs key (or a new one when key is empty) with every
// scope, and returns its plaintext. An already installed key is fine.
func installAdminKey(ctx context.Context, svc *lifecycle.Service, key string) (string, error) {
	_, plaintext, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{
		Name: "admin",
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeTasksAdmin, lifecycle.ScopeShipWrite,
			lifecycle.ScopeEventsRead, lifecycle.ScopeWebhooksRead, lifecycle.ScopeWebhooksWrite, lifecycle.ScopeReviewsWrite,
			lifecycle.ScopeCIWrite, lifecycle.ScopeKeysAdmin},
		Actor:     lifecycle.Actor{ID: "admin", Role: lifecycle.RoleUser},
		Plaintext: key,
	})
	if errors.Is(err, lifecycle.ErrConflict) {
		return key, nil
	}
	if err != nil {
		return "", fmt.Errorf("install the admin key: %w", err)
	}
	return plaintext, nil
}
