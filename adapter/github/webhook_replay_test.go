package github

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// A signed delivery captured on its way and replayed under a new
// X-GitHub-Delivery, which the signature does not cover, is answered but
// not applied: GitHub is not read again. GitHub's redelivery of
// it (the same ID and body) is not applied either; a delivery of another
// body is.
func TestReplayedSignedDeliveryIsNotApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	_, sub := e.submitted(t)
	payloadAt := func() (string, []byte) {
		e.f.Push(fmt.Sprintf("lifecycle/gh-%d", e.n))
		pr := lifecycle.PullRequest{PullRequestRef: e.a.ref(sub.PRNumber), Head: e.f.pull(t, sub.PRNumber).Head}
		return e.f.webhookPayload(pr, lifecycle.ProviderHeadChanged)
	}
	post := func(event, id string, payload []byte) {
		t.Helper()
		req := signedDelivery(t, event, id, payload)
		req.RequestURI = ""
		req.URL.Scheme, req.URL.Host = "http", strings.TrimPrefix(e.srv.URL, "http://")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery %s answered %d, want 200", id, resp.StatusCode)
		}
	}
	event, captured := payloadAt()
	post(event, "captured", captured)
	reads := e.f.Calls("")
	post(event, "replayed-under-a-new-id", captured)
	post(event, "captured", captured) // GitHub's redelivery
	if n := e.f.Calls(""); n != reads {
		t.Errorf("the captured body sent again made %d more calls to GitHub, want none", n-reads)
	}
	event, next := payloadAt()
	post(event, "next", next)
	if n := e.f.Calls(""); n == reads {
		t.Error("a delivery of another body made no call to GitHub")
	}
}
