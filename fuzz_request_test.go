package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"time"

	"github.com/tasklifecycle/lifecycle/internal/eventstream"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/jsonscan"
	"github.com/tasklifecycle/lifecycle/internal/webhooksend"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// fuzzDecoder fuzzes the decoding and checking of one request body as the
// handler does it: nothing may panic or take long; a refusal is a
// validation error listing 1 to 100 fields; an accepted body is valid JSON
// whose strings hold no control characters but tab and newline.
func fuzzDecoder[T any](f *testing.F, allowEmpty bool, check func(*T) error, seeds ...string) {
	f.Helper()
	for _, s := range append(seeds, `{}`, ``, `null`, `[]`, `{"a":1}`, `{"x":"\u0000"}`, "{\"x\":\"\xff\"}", `{"x":"\ud800"}`,
		`{"labels":[1,2,3,4,5,6,7,8,9]}`, strings.Repeat("[", 40)+strings.Repeat("]", 40)) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var p T
		var chk func() error
		if check != nil {
			chk = func() error { return check(&p) }
		}
		start := time.Now()
		err := httpapi.DecodeRaw(context.Background(), raw, &p, &scanLimits, allowEmpty, chk)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%d bytes took %s", len(raw), d)
		}
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("%q: a refusal that is not a validation error: %v", raw, err)
			}
			if len(ve.Fields) == 0 || len(ve.Fields) > lifecycletype.MaxFieldErrors {
				t.Fatalf("%q: %d field errors", raw, len(ve.Fields))
			}
			return
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("accepted %q, which is not JSON: %v", raw, err)
		}
		if s, ok := badString(v); ok {
			t.Fatalf("accepted %q with the string %q", raw, s)
		}
	})
}

// badString returns a string of v holding a forbidden control character.
func badString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, strings.ContainsFunc(v, jsonscan.ForbiddenControl)
	case []any:
		for _, e := range v {
			if s, ok := badString(e); ok {
				return s, true
			}
		}
	case map[string]any:
		for _, e := range v {
			if s, ok := badString(e); ok {
				return s, true
			}
		}
	}
	return "", false
}

func FuzzCreateTaskRequest(f *testing.F) {
	fuzzDecoder(f, false, (*CreateTaskParams).validate,
		`{"identifier":"WEB-1","title":"t","priority":"high","acceptanceCriteria":["a"],"links":{"issue":"https://x.example/1","parentIssue":null},"context":{"project":"web","goal":"g"},"labels":["frontend"]}`,
		`{"identifier":"W","title":"t","links":{"issue":"https://x.example/1"},"assigneeAgentId":"agent-1","description":"d\n\tx"}`)
}

func FuzzShipRequest(f *testing.F) {
	fuzzDecoder(f, false, (*ShipParams).validate,
		`{"mode":"merge_and_deploy","targetEnvironment":"staging","expectedHeadSha":"0123456789abcdef0123456789abcdef01234567"}`,
		`{"mode":"merge_only","targetEnvironment":"production","expectedHeadSha":"x"}`)
}

func FuzzReviewRequest(f *testing.F) {
	fuzzDecoder(f, false, (*PostReviewParams).validate, `{"outcome":"approved","body":"Looks good."}`, `{"outcome":"changes_requested"}`)
}

func FuzzReportChecksRequest(f *testing.F) {
	fuzzDecoder(f, false, (*ReportChecksParams).validate,
		`{"headSha":"0123456789abcdef0123456789abcdef01234567","checks":[{"name":"build","status":"passed","url":"https://ci.example.com/1"}]}`,
		`{"headSha":"0123456789abcdef0123456789abcdef01234567","checks":[1,2,{"name":"","status":"green"}]}`)
}

func FuzzBlockerRequest(f *testing.F) {
	fuzzDecoder(f, false, (*RecordBlockerParams).validate,
		`{"reason":"missing_credentials","actionRequired":"Add the secret","resumeInstructions":"Re-run","sourceRunId":"run-1"}`)
}

func FuzzResolveBlockerRequest(f *testing.F) {
	fuzzDecoder[ResolveBlockerParams](f, true, nil, `{"resolution":"secret added"}`)
}

func FuzzCancelRequest(f *testing.F) {
	fuzzDecoder[CancelTaskParams](f, true, nil, `{"reason":"duplicate"}`)
}

func FuzzSubscriptionRequest(f *testing.F) {
	fuzzDecoder(f, false, (*CreateSubscriptionParams).validate,
		`{"url":"https://hooks.example.com/x","eventTypes":["task.shipped"],"secret":"0123456789abcdef","description":"d","filters":{"taskIds":["tsk_abcdefghijklmnopqrstuv"],"projects":["web"]}}`)
}

func FuzzReplayRequest(f *testing.F) {
	fuzzDecoder(f, false, (*replayBody).validate, `{"fromSequence":1200}`, `{"fromSequence":-1}`, `{"fromSequence":"3"}`, `{}`)
}

func FuzzAPIKeyRequest(f *testing.F) {
	admin := Principal{ID: "key_a", Actor: Actor{ID: "ops", Role: RoleUser}, Scopes: []Scope{ScopeKeysAdmin, ScopeTasksRead}}
	fuzzDecoder(f, false, func(p *CreateAPIKeyParams) error {
		if err := admin.checkGrant(p); err != nil {
			return lifecycletype.Invalid("scopes", err.Error()) // the handler answers 403; here any refusal must be an error
		}
		return p.validate()
	}, `{"name":"web agent","scopes":["tasks:read"],"actor":{"id":"agent-web","role":"agent"}}`,
		`{"name":"x","scopes":["tasks:write","nope"],"actor":{"id":"","role":"system"}}`)
}

// FuzzListCursor checks the cursors of the listings: a cursor is accepted
// only when it is the one encodeCursor makes of its position, and the
// limit and cursor query parameters never fail otherwise than by name.
func FuzzListCursor(f *testing.F) {
	for _, s := range []string{"", encodeCursor(1), encodeCursor(1 << 40), "cDA", "p1", "%%%", "cC0x", "cDEyMw"} {
		f.Add(s, "50")
	}
	f.Add("x", "0")
	f.Add("", "-1")
	f.Add("", "99999999999999999999")
	f.Fuzz(func(t *testing.T, cursor, limit string) {
		if pos, ok := decodeCursor(cursor); ok && cursor != "" && encodeCursor(pos) != cursor {
			t.Fatalf("cursor %q accepted as %d, which encodes as %q", cursor, pos, encodeCursor(pos))
		}
		r := httptest.NewRequest("GET", "/event-subscriptions?"+url.Values{"cursor": {cursor}, "limit": {limit}}.Encode(), nil)
		p, err := listParams(r)
		if err == nil {
			var v lifecycletype.Validator
			p.check(&v)
			err = v.Err()
		}
		if err != nil && !errors.Is(err, ErrValidation) {
			t.Fatalf("%q %q: %v", cursor, limit, err)
		}
		if err == nil && (p.Limit < 1 || p.Limit > 200) {
			t.Fatalf("limit %q accepted as %d", limit, p.Limit)
		}
	})
}

// FuzzStreamParams checks the query and Last-Event-ID parser of the event
// stream: it refuses by name, and what it accepts is within the contract.
func FuzzStreamParams(f *testing.F) {
	f.Add("eventTypes=task.updated,task.shipped&taskId=tsk_abcdefghijklmnopqrstuv&heartbeatSeconds=30", "evt_abcdefghijklmnopqrstuv")
	f.Add("eventTypes=&heartbeatSeconds=9", "")
	f.Add("eventTypes=task.nope&taskId=x&taskId=y&cursor=evt_1", " ")
	f.Add("heartbeatSeconds=60&heartbeatSeconds=10", "\x00")
	f.Fuzz(func(t *testing.T, query, lastEventID string) {
		r, err := http.NewRequest("GET", "/task-events/stream", nil)
		if err != nil {
			t.Skip()
		}
		r.URL.RawQuery = query
		r.Header["Last-Event-Id"] = []string{lastEventID}
		p, err := parseStreamParams(r)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("%q: %v", query, err)
			}
			return
		}
		if hb := p.Heartbeat / time.Second; hb < eventstream.MinHeartbeat || hb > eventstream.MaxHeartbeat {
			t.Fatalf("%q: heartbeat %s", query, p.Heartbeat)
		}
		for _, typ := range p.Filter.Types {
			if !typ.Valid() {
				t.Fatalf("%q: event type %q", query, typ)
			}
		}
		if p.Filter.TaskID != "" && !validTaskID(p.Filter.TaskID) {
			t.Fatalf("%q: task ID %q", query, p.Filter.TaskID)
		}
	})
}

// The headers the exported constants name are those deliveries carry
// (package webhooksend sets them).
func TestWebhookHeadersAgree(t *testing.T) {
	t.Parallel()
	for _, h := range [][2]string{
		{HeaderSignature, webhooksend.HeaderSignature}, {HeaderEventID, webhooksend.HeaderEventID},
		{HeaderDeliveryID, webhooksend.HeaderDeliveryID}, {HeaderEventType, webhooksend.HeaderEventType},
	} {
		if h[0] != h[1] {
			t.Errorf("the root names %q, deliveries carry %q", h[0], h[1])
		}
	}
}

// FuzzWebhookSignature checks the verifier: it accepts exactly the
// signature of the body under the secret, and nothing else.
func FuzzWebhookSignature(f *testing.F) {
	f.Add([]byte(`{"id":"evt_1"}`), "secret-0123456789", "")
	f.Add([]byte{}, "", "sha256=")
	f.Add([]byte("x"), "k", "sha256=zz")
	f.Add([]byte("x"), "k", "SHA256=00")
	f.Fuzz(func(t *testing.T, body []byte, secret, signature string) {
		good := webhooksend.Sign([]byte(secret), body)
		if err := VerifyWebhookSignature(body, good, secret); err != nil {
			t.Fatalf("the right signature is refused: %v", err)
		}
		// The digest's hex digits may come in either case.
		right := strings.HasPrefix(signature, signaturePrefix) && strings.EqualFold(signature, good)
		err := VerifyWebhookSignature(body, signature, secret)
		if (err == nil) != right {
			t.Fatalf("signature %q: %v (the right one is %q)", signature, err, good)
		}
		if err != nil && !errors.Is(err, ErrInvalidSignature) {
			t.Fatalf("an error that is not ErrInvalidSignature: %v", err)
		}
		r := httptest.NewRequest("POST", "/hooks", bytes.NewReader(body))
		r.Header.Set(HeaderSignature, signature)
		got, err := VerifyWebhookRequest(r, secret, 0)
		if (err == nil) != right || (err == nil && !bytes.Equal(got, body)) {
			t.Fatalf("VerifyWebhookRequest: %v", err)
		}
	})
}
