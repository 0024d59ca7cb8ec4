package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/store/postgres"
)

// replicaOptions configure one replica.
type replicaOptions struct {
	name         string        // the instance ID
	addr         string        // where it listens
	dsn          string        // the shared database
	schema       string        // the schema in it
	data         string        // the shared data directory: repos/ and deployments.log
	adminKey     string        // the admin key, the same on every replica
	webhookCA    string        // a PEM file of certificates to trust for webhook receivers
	shipLease    time.Duration // lifecycle.Config.ShipLease
	webhookLease time.Duration // lifecycle.Config.WebhookLease
	deployTime   time.Duration // how long each deployment takes
}

// runReplica runs one replica until ctx ends: a Service on the shared
// PostgreSQL schema, the shared git repositories as its code host and a
// deployer that logs each deployment to the shared data directory. It
// prints "replica NAME serving on BASE" to stdout once it serves.
func runReplica(ctx context.Context, o replicaOptions, stdout, stderr io.Writer) error {
	if o.name == "" || o.adminKey == "" || o.data == "" {
		return errors.New("a replica needs -replica NAME, -data (the data directory the replicas share) and the admin key in LIFECYCLE_ADMIN_KEY")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("replica", o.name)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w: pass another -addr", o.addr, err)
	}
	defer ln.Close()
	base := "http://" + ln.Addr().String()

	store, err := postgres.New(ctx, postgres.Config{DSN: o.dsn, Schema: o.schema})
	if err != nil {
		return err
	}
	defer store.Close()
	// Every replica opens the same repositories: the adapter takes a file
	// lock for each write, so they see each other's commits and merges.
	host, err := artifact.New(artifact.Config{Dir: filepath.Join(o.data, "repos")})
	if err != nil {
		return err
	}
	defer host.Close() // lets a running packer finish
	var webhookTLS *tls.Config
	if o.webhookCA != "" {
		pem, err := os.ReadFile(o.webhookCA)
		if err != nil {
			return fmt.Errorf("-webhook-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-webhook-ca: %s holds no PEM certificate", o.webhookCA)
		}
		webhookTLS = &tls.Config{RootCAs: pool}
	}
	svc, err := lifecycle.New(lifecycle.Config{
		// One ID per replica: a replica restarted with its ID resumes its
		// leased work at once; the others take it over when it ends.
		InstanceID:      o.name,
		Store:           store,
		BaseURL:         base,
		Adapters:        []lifecycle.AdapterBinding{{Adapter: host}},
		ArtifactAdapter: host,
		Deployer:        &logDeployer{replica: o.name, log: filepath.Join(o.data, "deployments.log"), took: o.deployTime},
		ReviewRouter:    lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}},
		ShipLease:       o.shipLease,
		WebhookLease:    o.webhookLease,
		// Loopback receivers, for the example and its test.
		AllowPrivateWebhookTargets: true,
		WebhookTLSConfig:           webhookTLS,
		Logger:                     log,
	})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	defer svc.Close(context.Background())
	// Replicas starting together install the key together: one creates it,
	// the others find it.
	_, _, err = svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "replicas admin", Plaintext: o.adminKey,
		Actor: lifecycle.Actor{ID: "admin", Role: lifecycle.RoleUser}, Scopes: allScopes})
	if err != nil && !errors.Is(err, lifecycle.ErrConflict) {
		return fmt.Errorf("install the admin key: %w", err)
	}

	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "replica %s serving on %s\n", o.name, base)
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Event streams never end by themselves: close the Service beside
	// Shutdown, which ends them.
	closed := make(chan error, 1)
	go func() { closed <- svc.Close(shutdown) }()
	return errors.Join(srv.Shutdown(shutdown), <-closed)
}

// allScopes are the scopes of the admin key.
var allScopes = []lifecycle.Scope{
	lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeTasksAdmin, lifecycle.ScopeShipWrite,
	lifecycle.ScopeEventsRead, lifecycle.ScopeWebhooksRead, lifecycle.ScopeWebhooksWrite, lifecycle.ScopeReviewsWrite,
	lifecycle.ScopeCIWrite, lifecycle.ScopeKeysAdmin,
}

// logDeployer stands in for a deployment system shared by the replicas:
// a deployment takes a while, then appends "OPERATION REPLICA COMMIT" to a
// log file that every replica shares, so that who deployed what, and how
// often, can be read from outside.
type logDeployer struct {
	replica string
	log     string
	took    time.Duration
	mu      sync.Mutex
}

// Deploy implements lifecycle.Deployer.
func (d *logDeployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	select {
	case <-time.After(d.took):
	case <-ctx.Done():
		return lifecycle.Deployment{}, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return lifecycle.Deployment{}, err
	}
	// One write of a short line with O_APPEND: lines of several processes
	// do not interleave.
	_, err = fmt.Fprintf(f, "%s %s %s\n", req.OperationID, d.replica, req.CommitSHA)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return lifecycle.Deployment{}, err
	}
	return lifecycle.Deployment{ID: req.OperationID + "@" + d.replica, Environment: req.Environment,
		CommitSHA: req.CommitSHA, DeployedAt: lifecycle.NewTimestamp(time.Now())}, nil
}
