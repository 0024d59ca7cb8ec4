// Package webhooksend makes the HTTP side of one webhook delivery attempt:
// the request, signed twice (the service's own X-Service-Signature and the
// Standard Webhooks headers), posted through a client that follows no
// redirect and uses no proxy, the answer read within bounds and judged a
// success or a failure worth a retry, the wait before that retry, and the
// attempts made at once within a bound per target and a bound over all.
// What is delivered, to whom and when, and where outcomes are recorded, is
// the caller's.
package webhooksend

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Headers of a delivery, besides the Standard Webhooks ones
// (Webhook-Id, Webhook-Timestamp, Webhook-Signature).
const (
	// HeaderSignature holds SignaturePrefix and the lowercase hex
	// HMAC-SHA256 of the body, keyed with the subscription's secret.
	HeaderSignature = "X-Service-Signature"
	// HeaderEventID holds the event ID, the same on every attempt.
	HeaderEventID = "X-Service-Event-Id"
	// HeaderDeliveryID holds the ID of the attempt, new on each.
	HeaderDeliveryID = "X-Service-Delivery-Id"
	// HeaderEventType holds the event type.
	HeaderEventType = "X-Service-Event-Type"
)

// UserAgent is the User-Agent of deliveries.
const UserAgent = "tasklifecycle-webhooks/1"

// SignaturePrefix begins the value of HeaderSignature.
const SignaturePrefix = "sha256="

// maxAnswerRead is the most of an answer's body read (and discarded), so
// that the connection can be reused.
const maxAnswerRead = 64 << 10

// Sign returns the HeaderSignature value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return SignaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// SignStandard returns the Webhook-Signature value of the Standard Webhooks
// scheme: "v1," and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}".
func SignStandard(secret []byte, eventID string, unix int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(eventID))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ClientConfig configures a client that delivers webhooks.
type ClientConfig struct {
	// Dial makes the client's connections (a guard that refuses private
	// addresses, say); no proxy dials in its place.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, when not nil, configures its TLS connections; it is cloned.
	TLS *tls.Config
	// Concurrency is how many attempts may be in flight at once; the
	// client keeps as many idle connections per host, and four times as
	// many in all.
	Concurrency int
	// Timeout bounds a TLS handshake and the wait for an answer's headers.
	Timeout time.Duration
}

// NewClient returns a client that delivers webhooks as c says. It follows
// no redirect (an answer 3xx is a failed attempt: following it would send
// the event where the subscriber did not say), uses no proxy (which would
// dial around c.Dial) and asks for no compression.
func NewClient(c ClientConfig) *http.Client {
	var tlsConfig *tls.Config
	if c.TLS != nil {
		tlsConfig = c.TLS.Clone()
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           c.Dial,
		TLSClientConfig:       tlsConfig,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * c.Concurrency,
		MaxIdleConnsPerHost:   c.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   c.Timeout,
		ResponseHeaderTimeout: c.Timeout,
		DisableCompression:    true,
	}
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Attempt is one attempt at delivering an event.
type Attempt struct {
	// URL is the receiver's.
	URL string
	// EventID, DeliveryID and EventType fill the headers of those names;
	// EventID is the Webhook-Id too.
	EventID, DeliveryID, EventType string
	// Body is the event, as JSON.
	Body []byte
	// Secret keys both signatures.
	Secret []byte
	// At is when the attempt is made: its Webhook-Timestamp, and the time
	// a Retry-After date counts from.
	At time.Time
	// Header, when not nil, adds headers of the caller's to the request
	// (the W3C traceparent of the attempt's span, say) before the
	// delivery's own are set, which it cannot replace.
	Header func(h http.Header)
}

// Outcome is what came of an Attempt.
type Outcome struct {
	// Status is the receiver's HTTP status, or 0 when it did not answer.
	Status int
	// Failure says why the attempt failed, without the URL (which may
	// hold a token of the subscriber's); "" when it succeeded (2xx).
	Failure string
	// RetryAfter is how long the receiver asked to wait (with 429 or
	// 503), or 0.
	RetryAfter time.Duration
	// Err is why the attempt got no answer, or nil: a dial refused by
	// ClientConfig.Dial is found in it.
	Err error
}

// Post makes attempt a through client, waiting at most timeout for the
// answer (ctx ends it too), and says what came of it.
func Post(ctx context.Context, client *http.Client, timeout time.Duration, a *Attempt) Outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(a.Body))
	if err != nil {
		return Outcome{Failure: "cannot build the request: " + err.Error(), Err: err}
	}
	h := req.Header
	if a.Header != nil {
		a.Header(h)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", UserAgent)
	h.Set(HeaderEventID, a.EventID)
	h.Set(HeaderDeliveryID, a.DeliveryID)
	h.Set(HeaderEventType, a.EventType)
	h.Set(HeaderSignature, Sign(a.Secret, a.Body))
	unix := a.At.Unix()
	h.Set("Webhook-Id", a.EventID)
	h.Set("Webhook-Timestamp", strconv.FormatInt(unix, 10))
	h.Set("Webhook-Signature", SignStandard(a.Secret, a.EventID, unix, a.Body))
	resp, err := client.Do(req)
	if err != nil {
		return Outcome{Failure: describe(err, timeout), Err: err}
	}
	// Read a little of the body so that the connection can be reused.
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerRead))
	resp.Body.Close()
	o := Outcome{Status: resp.StatusCode}
	switch {
	case o.Status >= 200 && o.Status < 300:
	case o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable:
		o.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), a.At)
		fallthrough
	default:
		o.Failure = fmt.Sprintf("the receiver answered %d %s", o.Status, http.StatusText(o.Status))
		if o.Status >= 300 && o.Status < 400 {
			o.Failure += "; redirects are not followed"
		}
	}
	return o
}

// Each calls post(i) for each i from 0 to n-1, in its own goroutine, while
// it holds a slot of perTarget and one of global (semaphores: channels
// whose capacity is the number of slots). Calls start in order, each once
// it has its slots; when ctx is done as Each waits for a slot, it starts
// no more. Each returns when the calls started have returned.
func Each(ctx context.Context, perTarget, global chan struct{}, n int, post func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		if !acquire(ctx, perTarget) {
			break
		}
		if !acquire(ctx, global) {
			<-perTarget
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-global; <-perTarget }()
			post(i)
		}()
	}
	wg.Wait()
}

// acquire takes a slot of sem, or returns false when ctx is done first.
func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// describe says why an attempt got no answer, without the URL.
func describe(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// parseRetryAfter reads a Retry-After header, in seconds or an HTTP date,
// relative to now; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
		return time.Duration(min(secs, 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Delay returns how long after attempt n (from 1; at most len(schedule))
// the next waits: schedule[n-1], made up to jitter (a fraction, 0 to 1)
// shorter at random, or retryAfter when the receiver asked, clamped to
// between that delay and twice it.
func Delay(schedule []time.Duration, n int, jitter float64, retryAfter time.Duration) time.Duration {
	d := schedule[n-1]
	if jitter > 0 {
		// Only sooner, so that the last attempt stays within the time the
		// schedule puts it in (a replay window, say).
		d = time.Duration(float64(d) * (1 - jitter*rand.Float64()))
	}
	if retryAfter > 0 {
		d = min(max(retryAfter, d), 2*d)
	}
	return d
}
