package lifecycle_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// fakeClassifier answers with a fixed classification or error.
type fakeClassifier struct {
	c   lifecycle.Classification
	err error
}

func (f fakeClassifier) Classify(context.Context, lifecycle.RouteRequest) (lifecycle.Classification, error) {
	return f.c, f.err
}

func TestRoutingThroughTheAPI(t *testing.T) {
	t.Parallel()
	web := lifecycle.Agent{ID: "agent-web", Name: "Web Agent"}
	api := lifecycle.Agent{ID: "agent-api", Name: "API Agent"}
	rules := []lifecycle.RoutingRule{
		{Name: "critical-web", Project: "web", Priorities: []lifecycle.Priority{lifecycle.PriorityCritical}, Agent: api},
		{Name: "frontend", Labels: []string{"frontend"}, Agent: web},
		{Name: "web-any", Project: "web", Agent: web},
	}
	tests := []struct {
		name         string
		router       lifecycle.RulesRouterConfig
		body         map[string]any
		wantAgent    any // assigneeAgentId
		wantSource   any
		wantConf     any
		wantTriage   bool
		wantReason   map[string]any
		reasonHasKey string
	}{
		{
			name:       "first matching rule wins, all matches recorded",
			router:     lifecycle.RulesRouterConfig{Rules: rules},
			body:       apitest.TaskBody("R-1"), // project web, label frontend, priority high
			wantAgent:  "agent-web",
			wantSource: "deterministic_rule",
			wantConf:   1.0,
			wantReason: map[string]any{"matchedRules": []any{"frontend", "web-any"}},
		},
		{
			name:       "priority condition",
			router:     lifecycle.RulesRouterConfig{Rules: rules},
			body:       withMember(apitest.TaskBody("R-2"), "priority", "critical"),
			wantAgent:  "agent-api",
			wantSource: "deterministic_rule",
			wantConf:   1.0,
			wantReason: map[string]any{"matchedRules": []any{"critical-web", "frontend", "web-any"}},
		},
		{
			name:       "classifier above threshold",
			router:     lifecycle.RulesRouterConfig{Classifier: fakeClassifier{c: lifecycle.Classification{Agent: api, Confidence: 0.9, Explanation: "backend words"}}},
			body:       apitest.TaskBody("R-3"),
			wantAgent:  "agent-api",
			wantSource: "classifier",
			wantConf:   0.9,
			wantReason: map[string]any{"matchedRules": []any{}, "classifier": map[string]any{
				"agent": map[string]any{"id": "agent-api", "name": "API Agent"}, "confidence": 0.9, "threshold": 0.7, "explanation": "backend words",
			}},
		},
		{
			name:       "classifier below threshold, best effort allowed",
			router:     lifecycle.RulesRouterConfig{AllowBestEffort: true, Classifier: fakeClassifier{c: lifecycle.Classification{Agent: api, Confidence: 0.4}}},
			body:       apitest.TaskBody("R-4"),
			wantAgent:  "agent-api",
			wantSource: "classifier_best_effort",
			wantConf:   0.4,
		},
		{
			name:       "classifier below threshold goes to triage",
			router:     lifecycle.RulesRouterConfig{Threshold: 0.8, Classifier: fakeClassifier{c: lifecycle.Classification{Agent: api, Confidence: 0.79}}},
			body:       apitest.TaskBody("R-5"),
			wantAgent:  nil,
			wantSource: nil,
			wantConf:   nil,
			wantTriage: true,
		},
		{
			name:         "classifier failure goes to triage",
			router:       lifecycle.RulesRouterConfig{Classifier: fakeClassifier{err: errors.New("model unavailable")}},
			body:         apitest.TaskBody("R-6"),
			wantTriage:   true,
			reasonHasKey: "classifier",
		},
		{
			name:       "no rules, no classifier",
			router:     lifecycle.RulesRouterConfig{},
			body:       apitest.TaskBody("R-7"),
			wantTriage: true,
			wantReason: map[string]any{"matchedRules": []any{}},
		},
		{
			name:       "manual assignment bypasses routing",
			router:     lifecycle.RulesRouterConfig{Rules: rules},
			body:       withMember(apitest.TaskBody("R-8"), "assigneeAgentId", "agent-ops"),
			wantAgent:  "agent-ops",
			wantSource: "manual_triage",
			wantConf:   nil,
			wantReason: map[string]any{"manual": map[string]any{"assignedBy": map[string]any{"id": "tester", "role": "user"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			router, err := lifecycle.NewRulesRouter(tt.router)
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(c *lifecycle.Config) { c.Router = router })
			task := e.CreateTask(tt.body)
			got := map[string]any{
				"assigneeAgentId":   task["assigneeAgentId"],
				"assignmentSource":  task["assignmentSource"],
				"routingConfidence": task["routingConfidence"],
			}
			want := map[string]any{"assigneeAgentId": tt.wantAgent, "assignmentSource": tt.wantSource, "routingConfidence": tt.wantConf}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("assignment (-want +got):\n%s", diff)
			}
			if tt.wantTriage != (task["triageQueueId"] != nil) {
				t.Errorf("triageQueueId = %v, want set: %v", task["triageQueueId"], tt.wantTriage)
			}
			if tt.wantTriage && task["assignee"] != nil {
				t.Errorf("assignee of a triaged task = %v, want null", task["assignee"])
			}
			if task["routingDecisionId"] == nil {
				t.Error("routingDecisionId is null")
			}
			reason, _ := task["routingReason"].(map[string]any)
			if tt.wantReason != nil {
				if diff := cmp.Diff(tt.wantReason, reason); diff != "" {
					t.Errorf("routingReason (-want +got):\n%s", diff)
				}
			}
			if tt.reasonHasKey != "" {
				if _, ok := reason[tt.reasonHasKey]; !ok {
					t.Errorf("routingReason %v lacks %q", reason, tt.reasonHasKey)
				}
			}
		})
	}
}

func TestTriageQueuesPerProject(t *testing.T) {
	t.Parallel()
	router, err := lifecycle.NewRulesRouter(lifecycle.RulesRouterConfig{TriageQueues: map[string]string{"api": "trq_apiQueue0000000000000"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *lifecycle.Config) { c.Router = router })
	web1 := e.CreateTask(apitest.TaskBody("T-1"))
	web2 := e.CreateTask(apitest.TaskBody("T-2"))
	api := e.CreateTask(withMember(apitest.TaskBody("T-3"), "context", map[string]any{"project": "api", "goal": ""}))
	none := e.CreateTask(withMember(apitest.TaskBody("T-4"), "context", map[string]any{"project": nil, "goal": ""}))
	if web1["triageQueueId"] != web2["triageQueueId"] {
		t.Errorf("two tasks of one project went to queues %v and %v", web1["triageQueueId"], web2["triageQueueId"])
	}
	if api["triageQueueId"] != "trq_apiQueue0000000000000" {
		t.Errorf("configured queue not used: %v", api["triageQueueId"])
	}
	if none["triageQueueId"] == web1["triageQueueId"] {
		t.Errorf("tasks with and without a project share queue %v", none["triageQueueId"])
	}
}

func TestNewRulesRouterRejectsBadConfig(t *testing.T) {
	t.Parallel()
	bad := []lifecycle.RulesRouterConfig{
		{Rules: []lifecycle.RoutingRule{{Name: "no agent"}}},
		{Threshold: 1.5},
	}
	for _, cfg := range bad {
		if _, err := lifecycle.NewRulesRouter(cfg); err == nil {
			t.Errorf("NewRulesRouter(%+v) accepted a bad config", cfg)
		}
	}
}

func TestRouterErrorIsInternal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Router = failingRouter{} })
	body := e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: e.Admin, Body: apitest.TaskBody("ENG-1")}, http.StatusInternalServerError)
	if apitest.ErrorCode(body) != "internal" {
		t.Errorf("error = %v, want internal", body)
	}
}

type failingRouter struct{}

func (failingRouter) Route(context.Context, lifecycle.RouteRequest) (lifecycle.Routing, error) {
	return lifecycle.Routing{}, errors.New("router down")
}
