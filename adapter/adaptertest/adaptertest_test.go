package adaptertest_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// The suite's webhook and deployment tests run against a host faked here:
// the memory host with a webhook intake, signed (as GitHub signs) or with
// a token (as GitLab sends one), and a Deployer that waits for the host to
// finish each deployment.
func TestSuite(t *testing.T) {
	t.Parallel()
	for _, token := range []bool{false, true} {
		t.Run(fmt.Sprintf("token=%v", token), func(t *testing.T) {
			t.Parallel()
			h := adaptertest.Harness{
				New: func(t *testing.T) lifecycle.ProviderAdapter {
					return &fakeHost{Adapter: memory.New(memory.Config{}), token: token, pending: make(map[string]*fakeDeployment)}
				},
				Deliver: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *http.Request {
					return a.(*fakeHost).deliver(t, pr, kind)
				},
				NewDeployer: func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer { return a.(*fakeHost) },
				FinishDeployment: func(t *testing.T, a lifecycle.ProviderAdapter, req lifecycle.DeployRequest) {
					a.(*fakeHost).finish(t, req)
				},
			}
			if token {
				h.WebhookTokenHeader = "X-Fake-Token"
			} else {
				h.WebhookSignatureHeader = "X-Fake-Signature"
			}
			adaptertest.Run(t, h)
		})
	}
}

const secret = "s3cret"

// fakeHost is the memory host with webhooks and deployments.
type fakeHost struct {
	*memory.Adapter
	token      bool
	deliveries atomic.Int64

	mu      sync.Mutex
	pending map[string]*fakeDeployment // by operation
}

var (
	_ lifecycle.WebhookIntake = (*fakeHost)(nil)
	_ lifecycle.Deployer      = (*fakeHost)(nil)
)

// payload is the body of a fake delivery.
type payload struct {
	Kind       lifecycle.ProviderEventKind `json:"kind"`
	PR         lifecycle.PullRequestRef    `json:"pr"`
	HeadSHA    string                      `json:"headSha"`
	Deployment *lifecycle.DeploymentStatus `json:"deployment,omitempty"`
}

func (h *fakeHost) deliver(t *testing.T, pr lifecycle.PullRequest, kind lifecycle.ProviderEventKind) *http.Request {
	p := payload{Kind: kind, PR: pr.PullRequestRef, HeadSHA: pr.HeadSHA}
	switch kind {
	case adaptertest.IgnoredEvent:
		p.Kind = "ping"
	case lifecycle.ProviderDeploymentStatus:
		p.PR = lifecycle.PullRequestRef{}
		p.Deployment = &lifecycle.DeploymentStatus{ID: "dep_1", State: "success"}
	case lifecycle.ProviderReviewDismissed:
		return nil // this host cannot
	}
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/somewhere", bytes.NewReader(body))
	req.Header.Set("X-Fake-Delivery", fmt.Sprintf("delivery-%d", h.deliveries.Add(1)))
	if h.token {
		req.Header.Set("X-Fake-Token", secret)
	} else {
		req.Header.Set("X-Fake-Signature", sign(body))
	}
	return req
}

func sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (h *fakeHost) WebhookHandler(sink lifecycle.ProviderEventSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ok bool
		if h.token {
			ok = hmac.Equal([]byte(r.Header.Get("X-Fake-Token")), []byte(secret))
		} else {
			ok = hmac.Equal([]byte(r.Header.Get("X-Fake-Signature")), []byte(sign(body)))
		}
		if !ok {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if p.Kind == "ping" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		ev := lifecycle.ProviderEvent{Source: "fake", DeliveryID: r.Header.Get("X-Fake-Delivery"), Kind: p.Kind, PullRequest: p.PR, HeadSHA: p.HeadSHA, Deployment: p.Deployment}
		if err := sink.ApplyProviderEvent(r.Context(), ev); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// fakeDeployment is a deployment at the fake host, done once finished.
type fakeDeployment struct {
	dep      lifecycle.Deployment
	finished chan struct{}
}

// Deploy creates a deployment of the operation, if it has none, and
// waits for the host to finish it.
func (h *fakeHost) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	pr, err := h.PullRequest(ctx, req.PullRequest)
	if err != nil {
		return lifecycle.Deployment{}, err
	}
	if pr.MergeCommitSHA != req.CommitSHA {
		return lifecycle.Deployment{}, errors.New("fake: no such commit")
	}
	h.mu.Lock()
	d, ok := h.pending[req.OperationID]
	if !ok {
		d = &fakeDeployment{
			dep:      lifecycle.Deployment{ID: fmt.Sprintf("dep_%d", len(h.pending)+1), Environment: req.Environment, CommitSHA: req.CommitSHA},
			finished: make(chan struct{}),
		}
		h.pending[req.OperationID] = d
	}
	h.mu.Unlock()
	select {
	case <-d.finished:
		return d.dep, nil
	case <-ctx.Done():
		return lifecycle.Deployment{}, ctx.Err()
	}
}

// finish waits for the deployment of req to appear, then finishes it.
func (h *fakeHost) finish(t *testing.T, req lifecycle.DeployRequest) {
	var d *fakeDeployment
	testenv.WaitFor(t, 5*time.Second, "a deployment of "+req.OperationID, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		d = h.pending[req.OperationID]
		return d != nil
	})
	d.dep.DeployedAt = lifecycle.NewTimestamp(time.Now())
	close(d.finished)
}
