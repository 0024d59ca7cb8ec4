package adaptertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// Tests of lifecycle.WebhookIntake.

var webhookTests = []test{
	{name: "Events", skip: needs("Deliver"), fn: testWebhookEvents},
	{name: "Redelivery", skip: needs("Deliver"), fn: testWebhookRedelivery},
	{name: "Unauthenticated", skip: needs("Deliver"), fn: testWebhookUnauthenticated},
	{name: "Ignored", skip: needs("Deliver"), fn: testWebhookIgnored},
	{name: "SinkFails", skip: needs("Deliver"), fn: testWebhookSinkFails},
}

// eventKinds are the kinds of provider events.
var eventKinds = []lifecycle.ProviderEventKind{
	lifecycle.ProviderHeadChanged,
	lifecycle.ProviderPullRequestClosed,
	lifecycle.ProviderPullRequestMerged,
	lifecycle.ProviderPullRequestReopened,
	lifecycle.ProviderPullRequestEdited,
	lifecycle.ProviderReviewSubmitted,
	lifecycle.ProviderReviewDismissed,
	lifecycle.ProviderChecksChanged,
	lifecycle.ProviderDeploymentStatus,
}

// hookPath is where the suite mounts webhook handlers.
const hookPath = "/hooks/adaptertest"

// sink records the events a webhook handler passes on, or fails them all
// with err.
type sink struct {
	err    error
	mu     sync.Mutex
	events []lifecycle.ProviderEvent
}

func (s *sink) ApplyProviderEvent(ctx context.Context, ev lifecycle.ProviderEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return s.err
}

// take returns the events recorded since the last take.
func (s *sink) take() []lifecycle.ProviderEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.events
	s.events = nil
	return evs
}

// intake is a webhook handler of an adapter, mounted under a path of the
// suite's, with the sink it feeds.
type intake struct {
	h    Harness
	a    lifecycle.ProviderAdapter
	sink *sink
	mux  *http.ServeMux
}

// newIntake returns the adapter's webhook handler, or fails the test when
// it has none.
func newIntake(t *testing.T, h Harness, a lifecycle.ProviderAdapter) *intake {
	t.Helper()
	wi := implements[lifecycle.WebhookIntake](t, a, "Deliver", true)
	if h.WebhookSignatureHeader == "" && h.WebhookTokenHeader == "" {
		t.Fatal("Harness.Deliver is set but neither Harness.WebhookSignatureHeader nor Harness.WebhookTokenHeader names the header that authenticates a delivery")
	}
	in := &intake{h: h, a: a, sink: new(sink), mux: http.NewServeMux()}
	in.mux.Handle("POST "+hookPath, wi.WebhookHandler(in.sink))
	return in
}

// delivery is a webhook delivery that can be sent again and altered.
type delivery struct {
	kind lifecycle.ProviderEventKind
	req  *http.Request
	body []byte
}

// deliver asks the harness for a delivery of kind on pr, or returns nil
// when the host cannot deliver it.
func (in *intake) deliver(t *testing.T, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *delivery {
	t.Helper()
	req := in.h.Deliver(t, in.a, pr, kind)
	if req == nil {
		return nil
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			t.Fatalf("read the body of the delivery: %v", err)
		}
		req.Body.Close()
	}
	return &delivery{kind: kind, req: req, body: body}
}

// send serves a copy of d, with its body replaced when body is not nil
// and its headers changed by edit, and returns the response's status.
func (in *intake) send(t *testing.T, d *delivery, body []byte, edit func(http.Header)) int {
	t.Helper()
	if body == nil {
		body = d.body
	}
	req := d.req.Clone(t.Context())
	req.Method = http.MethodPost
	req.URL.Path, req.URL.RawPath, req.RequestURI = hookPath, "", ""
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	if edit != nil {
		edit(req.Header)
	}
	rec := httptest.NewRecorder()
	in.mux.ServeHTTP(rec, req)
	return rec.Code
}

// accepted sends d and returns the events it gave, failing the test unless
// the answer is 2xx.
func (in *intake) accepted(t *testing.T, d *delivery) []lifecycle.ProviderEvent {
	t.Helper()
	if code := in.send(t, d, nil, nil); code < 200 || code > 299 {
		t.Fatalf("a delivery was answered %d, want 2xx", code)
	}
	return in.sink.take()
}

// eventOf returns the event of kind among evs, failing the test when
// there is none.
func eventOf(t *testing.T, evs []lifecycle.ProviderEvent, kind lifecycle.ProviderEventKind) lifecycle.ProviderEvent {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind == kind {
			return ev
		}
	}
	t.Fatalf("a delivery of %s gave the events %+v, none of kind %s", kind, evs, kind)
	return lifecycle.ProviderEvent{}
}

func testWebhookEvents(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	in := newIntake(t, h, a)
	pr := ensure(t, a, request(1, "sub_a"))
	var source string
	for _, kind := range eventKinds {
		t.Run(string(kind), func(t *testing.T) {
			d := in.deliver(t, pr, kind)
			if d == nil {
				t.Skipf("Harness.Deliver cannot deliver %s", kind)
			}
			evs := in.accepted(t, d)
			ev := eventOf(t, evs, kind)
			for _, ev := range evs {
				if ev.Source == "" || source != "" && ev.Source != source {
					t.Errorf("event %+v: Source %q, want the host's name, the same for every event (%q)", ev, ev.Source, source)
				}
				source = ev.Source
				if ev.DeliveryID != evs[0].DeliveryID {
					t.Errorf("the events of one delivery have the delivery IDs %q and %q", evs[0].DeliveryID, ev.DeliveryID)
				}
				if ev.HeadSHA != "" && !shaRE.MatchString(ev.HeadSHA) {
					t.Errorf("event %+v: HeadSHA is not 40 lowercase hex digits", ev)
				}
			}
			switch {
			case ev.PullRequest == pr.PullRequestRef:
			case ev.PullRequest == lifecycle.PullRequestRef{} && kind == lifecycle.ProviderChecksChanged:
				if ev.HeadSHA != pr.HeadSHA {
					t.Errorf("event %+v names no pull request, nor its head %s", ev, pr.HeadSHA)
				}
			case ev.PullRequest == lifecycle.PullRequestRef{} && kind == lifecycle.ProviderDeploymentStatus:
			default:
				t.Errorf("event %+v names the pull request %s, want %s", ev, ev.PullRequest, pr.PullRequestRef)
			}
			if kind == lifecycle.ProviderDeploymentStatus && (ev.Deployment == nil || ev.Deployment.ID == "" || ev.Deployment.State == "") {
				t.Errorf("deployment status event %+v lacks the deployment's ID and state", ev)
			}
			if kind != lifecycle.ProviderDeploymentStatus && ev.Deployment != nil {
				t.Errorf("%s event has a Deployment %+v", kind, *ev.Deployment)
			}
		})
	}
}

// anyDelivery returns a delivery of the first kind the harness can
// deliver, or skips the test.
func anyDelivery(t *testing.T, in *intake, pr lifecycle.PullRequest) *delivery {
	t.Helper()
	for _, kind := range eventKinds {
		if d := in.deliver(t, pr, kind); d != nil {
			return d
		}
	}
	t.Skip("Harness.Deliver delivers no kind of event")
	return nil
}

func testWebhookRedelivery(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	in := newIntake(t, h, a)
	pr := ensure(t, a, request(1, "sub_a"))
	d := anyDelivery(t, in, pr)
	first := in.accepted(t, d)
	again := in.accepted(t, d)
	if len(first) == 0 || len(again) != len(first) {
		t.Fatalf("a delivery gave %d events, delivered again %d; want the same, at least one", len(first), len(again))
	}
	for i := range first {
		if again[i].DeliveryID != first[i].DeliveryID || again[i].Source != first[i].Source {
			t.Errorf("a delivery sent twice gave the delivery IDs %s:%q, then %s:%q; want the same", first[i].Source, first[i].DeliveryID, again[i].Source, again[i].DeliveryID)
		}
	}
	if first[0].DeliveryID == "" {
		return // the host names no deliveries
	}
	other := in.accepted(t, in.deliver(t, pr, d.kind))
	if len(other) == 0 || other[0].DeliveryID == first[0].DeliveryID {
		t.Errorf("two deliveries gave the same delivery ID %q, want each its own", first[0].DeliveryID)
	}
}

// altered returns s with its last byte changed.
func altered(s string) string {
	if s == "" {
		return "x"
	}
	c := s[len(s)-1]
	if c == '0' {
		c = '1'
	} else {
		c = '0'
	}
	return s[:len(s)-1] + string(c)
}

func testWebhookUnauthenticated(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	in := newIntake(t, h, a)
	pr := ensure(t, a, request(1, "sub_a"))
	d := anyDelivery(t, in, pr)
	type attempt struct {
		name string
		body []byte
		edit func(http.Header)
	}
	var attempts []attempt
	for _, name := range []string{h.WebhookSignatureHeader, h.WebhookTokenHeader} {
		if name == "" {
			continue
		}
		if d.req.Header.Get(name) == "" {
			t.Fatalf("the delivery has no header %s", name)
		}
		attempts = append(attempts,
			attempt{"without " + name, nil, func(hd http.Header) { hd.Del(name) }},
			attempt{"with " + name + " empty", nil, func(hd http.Header) { hd.Set(name, "") }},
			attempt{"with another " + name, nil, func(hd http.Header) { hd.Set(name, altered(hd.Get(name))) }},
		)
	}
	if h.WebhookSignatureHeader != "" {
		tampered := append(bytes.Clone(d.body), "\n "...) // still the same JSON
		attempts = append(attempts, attempt{"with a body changed after signing", tampered, nil})
	}
	for _, at := range attempts {
		if code := in.send(t, d, at.body, at.edit); code != http.StatusUnauthorized {
			t.Errorf("a delivery %s was answered %d, want 401", at.name, code)
		}
		if evs := in.sink.take(); len(evs) != 0 {
			t.Errorf("a delivery %s gave the events %+v, want none", at.name, evs)
		}
	}
	if len(in.accepted(t, d)) == 0 {
		t.Error("the delivery as signed gave no event")
	}
}

func testWebhookIgnored(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	in := newIntake(t, h, a)
	pr := ensure(t, a, request(1, "sub_a"))
	d := in.deliver(t, pr, IgnoredEvent)
	if d == nil {
		t.Skip("Harness.Deliver cannot deliver an IgnoredEvent")
	}
	if evs := in.accepted(t, d); len(evs) != 0 {
		t.Errorf("a delivery the adapter should ignore gave the events %+v", evs)
	}
}

func testWebhookSinkFails(t *testing.T, h Harness, a lifecycle.ProviderAdapter) {
	in := newIntake(t, h, a)
	in.sink.err = errors.New("the store is down")
	pr := ensure(t, a, request(1, "sub_a"))
	d := anyDelivery(t, in, pr)
	if code := in.send(t, d, nil, nil); code >= 200 && code <= 299 {
		t.Errorf("a delivery the sink failed to apply was answered %d; want an error status, so that the host delivers it again", code)
	}
}
