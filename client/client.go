package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config configures a Client.
type Config struct {
	// BaseURL is where the server mounts the API, such as
	// "http://127.0.0.1:8080" or "https://example.com/lifecycle". Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <APIKey>". Required.
	APIKey string
	// HTTPClient sends the requests. Defaults to a client without a
	// timeout (event streams are long-lived; give calls a context with a
	// deadline instead).
	HTTPClient *http.Client
	// MaxRetries is how many times a call that can be repeated safely is
	// retried. Defaults to 4; a negative value turns retries off.
	MaxRetries int
	// MinBackoff is the first retry's delay; each retry doubles it, up to
	// MaxBackoff, and waits a random part of it. Defaults to 200 ms.
	MinBackoff time.Duration
	// MaxBackoff bounds the delay between retries, including one asked for
	// by Retry-After. Defaults to 10 s.
	MaxBackoff time.Duration
	// UserAgent is sent as User-Agent. Defaults to "lifecycle-go-client".
	UserAgent string
}

// Client calls the API of a lifecycle server. It is safe for concurrent use.
type Client struct {
	base *url.URL
	cfg  Config
	http *http.Client
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("client: Config.BaseURL is required: where the server mounts the API, such as http://127.0.0.1:8080")
	}
	base, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("client: Config.BaseURL %q is not an absolute http or https URL", cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		return nil, errors.New("client: Config.APIKey is required: an API key (lsk_...) with the scopes of the calls you make")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 4
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, fmt.Errorf("client: Config.MaxBackoff %v is shorter than MinBackoff %v", cfg.MaxBackoff, cfg.MinBackoff)
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "lifecycle-go-client"
	}
	return &Client{base: base, cfg: cfg, http: cfg.HTTPClient}, nil
}

// idempotencyKeyCtx is the context key of WithIdempotencyKey.
type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context whose calls that take an
// Idempotency-Key (Submit, Ship, CreateSubscription, ReplaySubscription) send key instead of a
// fresh random one. Use it to make a call safe across restarts of your own
// program: the same key and body get the first answer back.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// newIdempotencyKey returns a random key of 29 characters.
func newIdempotencyKey() string { return "lc-" + crand.Text() }

// call is one API call.
type call struct {
	method string
	path   string     // relative to the base URL, escaped
	query  url.Values // nil for none
	body   any        // encoded as JSON without its zero-valued members; nil for none
	// idempotent marks a call that may be sent again: GET, DELETE, and POSTs
	// with an Idempotency-Key.
	idempotent bool
	// idemKey sends an Idempotency-Key: the one of the context, or a new one.
	idemKey bool
	// goneOnRetryOK treats a 404 to a retry as success (a delete whose
	// first attempt succeeded but whose answer was lost).
	goneOnRetryOK bool
}

// do sends c, retrying it when it is idempotent, and decodes a successful
// JSON answer into out (when not nil).
func (cl *Client) do(ctx context.Context, c call, out any) error {
	var body []byte
	if c.body != nil {
		var err error
		if body, err = requestJSON(c.body); err != nil {
			return fmt.Errorf("client: encode the %s %s request: %w", c.method, c.path, err)
		}
	}
	var key string
	if c.idemKey {
		key, _ = ctx.Value(idempotencyKeyCtx{}).(string)
		if key == "" {
			key = newIdempotencyKey()
		}
	}
	u := cl.url(c.path, c.query)
	for attempt := 0; ; attempt++ {
		status, raw, header, err := cl.send(ctx, c.method, u, body, key)
		if err == nil && status < 300 {
			if out != nil && len(raw) > 0 {
				if err := json.Unmarshal(raw, out); err != nil {
					return fmt.Errorf("client: decode the answer to %s %s: %w", c.method, c.path, err)
				}
			}
			return nil
		}
		if err == nil {
			apiErr := parseError(status, header, raw)
			if c.goneOnRetryOK && attempt > 0 && status == http.StatusNotFound {
				return nil
			}
			err = apiErr
		}
		if !c.idempotent || attempt >= cl.cfg.MaxRetries || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if werr := sleep(ctx, cl.backoff(attempt, err)); werr != nil {
			return err
		}
	}
}

// url builds the absolute URL of a path relative to the base URL.
func (cl *Client) url(path string, query url.Values) string {
	u := *cl.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	if strings.Contains(path, "%") {
		u.RawPath = strings.TrimSuffix(cl.base.EscapedPath(), "/") + path
		if p, err := url.PathUnescape(u.RawPath); err == nil {
			u.Path = p
		}
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return u.String()
}

// send makes one attempt and reads the whole answer.
func (cl *Client) send(ctx context.Context, method, u string, body []byte, idemKey string) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("client: %w", err)
	}
	cl.authorize(req)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return 0, nil, nil, &transportError{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return 0, nil, nil, &transportError{err: err}
	}
	return resp.StatusCode, raw, resp.Header, nil
}

func (cl *Client) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+cl.cfg.APIKey)
	req.Header.Set("User-Agent", cl.cfg.UserAgent)
}

// transportError is a request that got no answer.
type transportError struct{ err error }

func (e *transportError) Error() string { return "client: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// retryable reports whether a failed attempt of an idempotent call may be
// sent again.
func retryable(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	var ae *Error
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.StatusCode {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusConflict:
		return ae.Reason == "request_in_progress"
	}
	return false
}

// backoff returns how long to wait before retry attempt+1: a random part
// of MinBackoff·2^attempt (capped at MaxBackoff), or the Retry-After the
// server asked for when that is longer.
func (cl *Client) backoff(attempt int, err error) time.Duration {
	ceiling := cl.cfg.MinBackoff << min(attempt, 20)
	if ceiling > cl.cfg.MaxBackoff || ceiling <= 0 {
		ceiling = cl.cfg.MaxBackoff
	}
	d := ceiling/2 + rand.N(ceiling/2+1)
	var ae *Error
	if errors.As(err, &ae) && ae.RetryAfter > d {
		d = min(ae.RetryAfter, cl.cfg.MaxBackoff)
	}
	return d
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// requestJSON encodes v as JSON and drops its members that hold a zero
// value (null, "", false, empty arrays and objects): the server reads a
// missing member as its zero value, so the request means the same, and it
// carries only what the caller set.
func requestJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	tree, _ = prune(tree)
	if tree == nil {
		tree = map[string]any{}
	}
	return json.Marshal(tree)
}

// prune removes zero-valued members from a decoded JSON value and reports
// whether what is left is itself zero.
func prune(v any) (any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, true
	case string:
		return v, v == ""
	case bool:
		return v, !v
	case map[string]any:
		for k, m := range v {
			if pm, zero := prune(m); zero {
				delete(v, k)
			} else {
				v[k] = pm
			}
		}
		return v, len(v) == 0
	case []any:
		for i, m := range v {
			if obj, ok := m.(map[string]any); ok {
				pm, _ := prune(obj)
				v[i] = pm
			}
		}
		return v, len(v) == 0
	}
	return v, false
}
