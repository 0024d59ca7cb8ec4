// Command webhookreceiver receives the webhook deliveries of a lifecycle
// Service and logs each event once. It shows what a receiver does:
//
//   - it serves HTTPS, as webhooks are delivered to https URLs only: at start
//     it makes a self-signed certificate for 127.0.0.1, ::1 and localhost,
//     and writes it to a PEM file in a new temporary directory, whose path
//     it prints, for the Service to trust;
//   - it checks each delivery's X-Service-Signature with
//     [lifecycle.VerifyWebhookRequest] before it parses the body, and
//     answers 401 when the signature does not match the secret;
//   - it deduplicates on X-Service-Event-Id, as delivery is at least once,
//     remembering the last 10,000 event ids;
//   - it answers 204 at once, so that the Service does not retry.
//
// Run it with the subscription's secret (16 to 128 characters), then the
// demo with the receiver's URL, the same secret, and the certificate path
// the receiver printed:
//
//	export WEBHOOK_SECRET=demo-secret-0123456789
//	go run ./examples/webhookreceiver
//	go run ./examples/demo -webhook-url https://127.0.0.1:8443/hooks \
//		-webhook-ca /tmp/webhookreceiver-.../cert.pem
//
// The certificate is new at each start: restart the demo with the new path
// after restarting the receiver. -secret gives the receiver the secret
// instead of WEBHOOK_SECRET (a command line shows in ps).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tasklifecycle/lifecycle"
)

// rememberIDs is how many event ids the receiver keeps for deduplication.
// The Service may retry a delivery up to about 71 hours after its first
// attempt: a receiver that gets more events than this in that time would
// keep the ids in its database for 72 hours instead.
const rememberIDs = 10_000

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "address to listen on")
	secret := flag.String("secret", os.Getenv("WEBHOOK_SECRET"), "the subscription's signing secret (or WEBHOOK_SECRET)")
	flag.Parse()
	if *secret == "" {
		log.Fatal("webhookreceiver: give the subscription's secret with -secret or WEBHOOK_SECRET")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *secret); err != nil {
		log.Fatalf("webhookreceiver: %v", err)
	}
}

// run serves the receiver on addr until ctx is done.
func run(ctx context.Context, addr, secret string) error {
	cert, certPEM, err := selfSignedCertificate(time.Now())
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "webhookreceiver-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certPath := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	mux := http.NewServeMux()
	mux.Handle("POST /hooks", newReceiver(secret, logger, rememberIDs))
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeTLS(ln, "", "") }()

	fmt.Printf("receiving webhooks at https://%s/hooks\n", ln.Addr())
	fmt.Printf("certificate:          %s\n\n", certPath)
	fmt.Printf("run the demo with:\n  WEBHOOK_SECRET=... go run ./examples/demo -webhook-url https://%s/hooks -webhook-ca %s\n\n", ln.Addr(), certPath)

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// receiver handles webhook deliveries: it verifies them, processes each
// event once, and answers.
type receiver struct {
	secret string
	log    *slog.Logger
	seen   *recentIDs
}

// newReceiver returns a receiver of deliveries signed with secret that
// logs events to logger and remembers the last remember event ids.
func newReceiver(secret string, logger *slog.Logger, remember int) *receiver {
	return &receiver{secret: secret, log: logger, seen: newRecentIDs(remember)}
}

// envelope is the part of a delivery's body the receiver reads.
type envelope struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Sequence int64  `json:"sequence"`
	Data     struct {
		TaskID string `json:"taskId"`
	} `json:"data"`
}

// ServeHTTP implements http.Handler.
func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	delivery := r.Header.Get(lifecycle.HeaderDeliveryID)
	// Verify the raw body before anything reads it as JSON. 0: the default
	// limit of 1 MiB.
	body, err := lifecycle.VerifyWebhookRequest(r, rc.secret, 0)
	if errors.Is(err, lifecycle.ErrInvalidSignature) {
		rc.log.Warn("delivery refused: bad signature", "delivery", delivery, "err", err)
		http.Error(w, "the signature does not match", http.StatusUnauthorized)
		return
	}
	if err != nil {
		rc.log.Warn("delivery refused", "delivery", delivery, "err", err)
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil || env.ID == "" {
		rc.log.Warn("delivery refused: not an event envelope", "delivery", delivery, "err", err)
		http.Error(w, "the body is not an event envelope", http.StatusBadRequest)
		return
	}
	// The header is not signed; the id in the body is. They are the same,
	// so insist on it: then a replay under another X-Service-Event-Id
	// cannot get past deduplication.
	if id := r.Header.Get(lifecycle.HeaderEventID); id != env.ID {
		rc.log.Warn("delivery refused: event id mismatch", "delivery", delivery, "header", id, "body", env.ID)
		http.Error(w, lifecycle.HeaderEventID+" differs from the event's id", http.StatusBadRequest)
		return
	}
	// A receiver whose processing can fail would forget the id again on
	// failure, and answer 5xx, so that the Service's retry is processed.
	if !rc.seen.add(env.ID) {
		rc.log.Info("duplicate delivery ignored", "event", env.ID, "delivery", delivery)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rc.log.Info("event", "type", env.Type, "task", env.Data.TaskID, "sequence", env.Sequence, "event", env.ID, "delivery", delivery)
	w.WriteHeader(http.StatusNoContent)
}

// recentIDs is a set of the last n ids added: a ring of ids beside a map,
// so that memory stays bounded however many events arrive.
type recentIDs struct {
	mu   sync.Mutex
	ids  map[string]bool
	ring []string
	next int // the ring slot to fill next, holding the oldest id when full
}

// newRecentIDs returns an empty set that keeps the last n ids (at least 1).
func newRecentIDs(n int) *recentIDs {
	n = max(n, 1)
	return &recentIDs{ids: make(map[string]bool, n), ring: make([]string, n)}
}

// add reports whether id is new, and remembers it, forgetting the oldest
// id when the set is full.
func (s *recentIDs) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids[id] {
		return false
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.ids, old)
	}
	s.ring[s.next] = id
	s.next = (s.next + 1) % len(s.ring)
	s.ids[id] = true
	return true
}

// selfSignedCertificate returns a new ECDSA P-256 certificate for
// 127.0.0.1, ::1 and localhost, valid for 30 days from now, with its PEM.
// It is self-signed: a client trusts it by adding the PEM to its roots.
func selfSignedCertificate(now time.Time) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "webhookreceiver"},
		NotBefore:    now.Add(-time.Hour), // a little slack for clock skew
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("create certificate: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
