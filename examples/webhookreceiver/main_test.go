package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

const testSecret = "receiver-test-secret-0123"

// logBuffer collects the receiver's JSON log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns the log records whose message is msg.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// serveReceiver serves a receiver of testSecret at /hooks of a TLS test
// server, and returns the server and the receiver's log.
func serveReceiver(t *testing.T) (*httptest.Server, *logBuffer) {
	t.Helper()
	logs := new(logBuffer)
	mux := http.NewServeMux()
	mux.Handle("POST /hooks", newReceiver(testSecret, slog.New(slog.NewJSONHandler(logs, nil)), 100))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv, logs
}

// signedHeader returns the headers the Service sends with body: its
// X-Service-Signature under secret, computed here from the scheme.
func signedHeader(secret, eventID, deliveryID string, body []byte) http.Header {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	h.Set(lifecycle.HeaderSignature, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	h.Set(lifecycle.HeaderEventID, eventID)
	h.Set(lifecycle.HeaderDeliveryID, deliveryID)
	h.Set(lifecycle.HeaderEventType, "task.updated")
	return h
}

// post POSTs body with h to srv's /hooks and returns the status.
func post(t *testing.T, srv *httptest.Server, body []byte, h http.Header) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/hooks", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestReceiver(t *testing.T) {
	t.Parallel()
	srv, logs := serveReceiver(t)
	const id, id2 = "evt_01JRECEIVERTEST000000000001", "evt_01JRECEIVERTEST000000000002"
	body := []byte(`{"id":"` + id + `","type":"task.updated","occurredAt":"2026-11-21T10:00:00Z","sequence":42,` +
		`"taskVersion":1,"traceId":null,"data":{"taskId":"tsk_123","taskIdentifier":"ENG-1","summary":"Résumé"}}`)

	if got := post(t, srv, body, signedHeader(testSecret, id, "dlv_1", body)); got != http.StatusNoContent {
		t.Fatalf("a signed delivery: status %d, want 204", got)
	}
	events := logs.records(t, "event")
	if len(events) != 1 {
		t.Fatalf("after one delivery, %d events logged, want 1", len(events))
	}
	want := map[string]any{"type": "task.updated", "task": "tsk_123", "sequence": float64(42), "event": id, "delivery": "dlv_1"}
	for k, v := range want {
		if events[0][k] != v {
			t.Errorf("logged %s = %v, want %v", k, events[0][k], v)
		}
	}

	// A retry: the same event in a new delivery.
	if got := post(t, srv, body, signedHeader(testSecret, id, "dlv_2", body)); got != http.StatusNoContent {
		t.Errorf("the same event again: status %d, want 204", got)
	}
	if n := len(logs.records(t, "event")); n != 1 {
		t.Errorf("after a duplicate, %d events logged, want 1: it was processed twice", n)
	}
	if n := len(logs.records(t, "duplicate delivery ignored")); n != 1 {
		t.Errorf("%d duplicates logged, want 1", n)
	}

	body2 := bytes.Replace(body, []byte(id), []byte(id2), 1)
	tampered := bytes.Replace(body2, []byte(`"sequence":42`), []byte(`"sequence":43`), 1)
	notEnvelope := []byte(`[1, 2]`)
	for _, tc := range []struct {
		name   string
		body   []byte
		header http.Header
		want   int
	}{
		{"wrong secret", body2, signedHeader("another-secret-0123456789", id2, "dlv_3", body2), http.StatusUnauthorized},
		{"tampered body", tampered, signedHeader(testSecret, id2, "dlv_4", body2), http.StatusUnauthorized},
		{"no signature", body2, http.Header{lifecycle.HeaderEventID: {id2}}, http.StatusUnauthorized},
		{"event id header differs from the body", body2, signedHeader(testSecret, "evt_other", "dlv_5", body2), http.StatusBadRequest},
		{"not an envelope", notEnvelope, signedHeader(testSecret, id2, "dlv_6", notEnvelope), http.StatusBadRequest},
	} {
		if got := post(t, srv, tc.body, tc.header); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	if n := len(logs.records(t, "event")); n != 1 {
		t.Errorf("after refused deliveries, %d events logged, want 1", n)
	}
	if n := len(logs.records(t, "delivery refused: bad signature")); n != 3 {
		t.Errorf("%d bad signatures logged, want 3", n)
	}
}

func TestRecentIDsForgetsTheOldest(t *testing.T) {
	t.Parallel()
	s := newRecentIDs(2)
	for _, step := range []struct {
		id   string
		want bool
	}{
		{"a", true}, {"a", false}, {"b", true}, {"a", false}, {"c", true}, // a forgotten
		{"a", true}, {"c", false}, {"b", true}, // b forgotten when a came back
	} {
		if got := s.add(step.id); got != step.want {
			t.Fatalf("add(%q) = %t, want %t", step.id, got, step.want)
		}
	}
}

// TestServiceDeliversToReceiver runs what the package doc describes: a
// Service that trusts the receiver's self-signed certificate delivers an
// event to it over HTTPS on 127.0.0.1, and the receiver accepts it.
func TestServiceDeliversToReceiver(t *testing.T) {
	t.Parallel()
	cert, certPEM, err := selfSignedCertificate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	logs := new(logBuffer)
	mux := http.NewServeMux()
	mux.Handle("POST /hooks", newReceiver(testSecret, slog.New(slog.NewJSONHandler(logs, nil)), 100))
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	// As the demo does with -webhook-ca.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("the certificate PEM holds no certificate")
	}
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1", Logger: slog.New(slog.DiscardHandler),
		AllowPrivateWebhookTargets: true, WebhookTLSConfig: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		svc.Close(ctx)
	})
	if _, err := svc.CreateSubscription(t.Context(), lifecycle.CreateSubscriptionParams{
		URL: srv.URL + "/hooks", EventTypes: []lifecycle.EventType{lifecycle.EventTaskUpdated}, Secret: testSecret,
	}); err != nil {
		t.Fatal(err)
	}
	task, err := svc.CreateTask(t.Context(), lifecycle.CreateTaskParams{
		Identifier: "ENG-1", Title: "Deliver me", Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/ENG-1"},
		Actor: lifecycle.Actor{ID: "u1", Role: lifecycle.RoleUser},
	})
	if err != nil {
		t.Fatal(err)
	}

	if !testenv.WaitUntil(20*time.Second, func() bool { return len(logs.records(t, "event")) > 0 }) {
		t.Fatalf("no event received in 20s; receiver log:\n%s", logs.String())
	}
	ev := logs.records(t, "event")[0]
	if ev["type"] != "task.updated" || ev["task"] != task.ID {
		t.Errorf("received %v %v, want task.updated of %s", ev["type"], ev["task"], task.ID)
	}
	if n := len(logs.records(t, "delivery refused: bad signature")); n != 0 {
		t.Errorf("%d deliveries refused with a bad signature", n)
	}
}
