package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
)

// Router picks the agent that works a new task, or sends the task to a
// triage queue. [RulesRouter] is the included implementation.
type Router interface {
	// Route decides where the task goes. An error fails the creation of the
	// task with 500; a Router that cannot decide should send the task to
	// triage instead.
	Route(ctx context.Context, req RouteRequest) (Routing, error)
}

// RouteRequest is what a Router knows of a task being created.
type RouteRequest struct {
	Identifier         string
	Title              string
	Description        string
	Priority           Priority
	Labels             []string
	Project            string
	Goal               string
	AcceptanceCriteria []string
}

// Routing is a Router's decision.
type Routing struct {
	// Agent is the chosen agent, or nil to send the task to triage.
	Agent *Agent
	// Source says how the agent was chosen; ignored when Agent is nil.
	Source AssignmentSource
	// Reason explains the decision (matched rules, classifier output); it
	// is served as routingReason and must marshal to a JSON object.
	Reason any
	// Confidence, when not nil, is the decision's confidence from 0 to 1.
	Confidence *float64
	// TriageQueueID names the queue of a task sent to triage; it must be
	// set when Agent is nil.
	TriageQueueID string
}

// Classifier suggests an agent for a task with a confidence, typically by
// asking a model. It is consulted by [RulesRouter] when no rule matches.
type Classifier interface {
	// Classify returns its best agent for the task. An error sends the
	// task to triage; it does not fail the creation.
	Classify(ctx context.Context, req RouteRequest) (Classification, error)
}

// Classification is a Classifier's suggestion.
type Classification struct {
	// Agent is the suggested agent; an empty Agent.ID means no suggestion.
	Agent Agent `json:"agent"`
	// Confidence is from 0 to 1.
	Confidence float64 `json:"confidence"`
	// Explanation is the classifier's own account, kept in routingReason.
	Explanation string `json:"explanation,omitempty"`
}

// RoutingRule sends tasks that match all of its conditions to its agent. An
// empty condition matches every task.
type RoutingRule struct {
	// Name identifies the rule in routingReason.
	Name string
	// Project, when not empty, must equal the task's project.
	Project string
	// Labels, when not empty, must all be among the task's labels.
	Labels []string
	// Priorities, when not empty, must contain the task's priority.
	Priorities []Priority
	// Agent receives the matching tasks.
	Agent Agent
}

func (r *RoutingRule) matches(req *RouteRequest) bool {
	if r.Project != "" && r.Project != req.Project {
		return false
	}
	for _, l := range r.Labels {
		if !slices.Contains(req.Labels, l) {
			return false
		}
	}
	return len(r.Priorities) == 0 || slices.Contains(r.Priorities, req.Priority)
}

// RulesRouterConfig configures a RulesRouter.
type RulesRouterConfig struct {
	// Rules are tried in order; the first that matches decides
	// (deterministic_rule).
	Rules []RoutingRule
	// Classifier, when set, is asked when no rule matches. Its agent is
	// taken (classifier) when its confidence reaches Threshold.
	Classifier Classifier
	// Threshold is the confidence a classification needs. Defaults to 0.7
	// (defaultRoutingThreshold).
	Threshold float64
	// AllowBestEffort takes a classification below Threshold
	// (classifier_best_effort) instead of sending the task to triage.
	AllowBestEffort bool
	// TriageQueues maps a project to its triage queue ID.
	TriageQueues map[string]string
	// DefaultTriageQueueID is the triage queue of tasks whose project has
	// none in TriageQueues. Defaults to an ID derived from the project name,
	// so each project has a stable queue of its own.
	DefaultTriageQueueID string
}

// defaultRoutingThreshold is the default RulesRouterConfig.Threshold.
const defaultRoutingThreshold = 0.7

// RulesRouter routes by deterministic rules, then by an optional
// classifier, and sends what is left to a triage queue.
type RulesRouter struct {
	cfg RulesRouterConfig
}

var _ Router = (*RulesRouter)(nil)

// NewRulesRouter checks cfg and returns a RulesRouter.
func NewRulesRouter(cfg RulesRouterConfig) (*RulesRouter, error) {
	for i, r := range cfg.Rules {
		if r.Agent.ID == "" {
			return nil, fmt.Errorf("lifecycle: routing rule %d (%q) has no Agent.ID: set the agent that receives its tasks", i, r.Name)
		}
		if r.Name == "" {
			cfg.Rules[i].Name = fmt.Sprintf("rule-%d", i+1)
		}
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = defaultRoutingThreshold
	}
	if cfg.Threshold < 0 || cfg.Threshold > 1 {
		return nil, fmt.Errorf("lifecycle: routing Threshold %v is outside 0..1", cfg.Threshold)
	}
	cfg.Rules = slices.Clone(cfg.Rules)
	return &RulesRouter{cfg: cfg}, nil
}

// ruleReason is the routingReason of a RulesRouter decision.
type ruleReason struct {
	MatchedRules []string        `json:"matchedRules"`
	Classifier   *classifierNote `json:"classifier,omitempty"`
}

type classifierNote struct {
	Agent       *Agent   `json:"agent,omitempty"`
	Confidence  *float64 `json:"confidence,omitempty"`
	Threshold   float64  `json:"threshold"`
	Explanation string   `json:"explanation,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// Route implements Router.
func (r *RulesRouter) Route(ctx context.Context, req RouteRequest) (Routing, error) {
	reason := ruleReason{MatchedRules: []string{}}
	var chosen *RoutingRule
	for i := range r.cfg.Rules {
		rule := &r.cfg.Rules[i]
		if rule.matches(&req) {
			reason.MatchedRules = append(reason.MatchedRules, rule.Name)
			if chosen == nil {
				chosen = rule
			}
		}
	}
	if chosen != nil {
		agent := chosen.Agent
		one := 1.0
		return Routing{Agent: &agent, Source: AssignmentDeterministicRule, Reason: reason, Confidence: &one}, nil
	}
	if r.cfg.Classifier != nil {
		note := &classifierNote{Threshold: r.cfg.Threshold}
		reason.Classifier = note
		c, err := r.cfg.Classifier.Classify(ctx, req)
		switch {
		case err != nil:
			if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
				return Routing{}, err
			}
			note.Error = err.Error()
		case c.Agent.ID != "":
			agent, conf := c.Agent, min(max(c.Confidence, 0), 1)
			note.Agent, note.Confidence, note.Explanation = &agent, &conf, c.Explanation
			if conf >= r.cfg.Threshold {
				return Routing{Agent: &agent, Source: AssignmentClassifier, Reason: reason, Confidence: &conf}, nil
			}
			if r.cfg.AllowBestEffort {
				return Routing{Agent: &agent, Source: AssignmentClassifierBestEffort, Reason: reason, Confidence: &conf}, nil
			}
		}
	}
	return Routing{Reason: reason, TriageQueueID: r.triageQueue(req.Project)}, nil
}

func (r *RulesRouter) triageQueue(project string) string {
	if q, ok := r.cfg.TriageQueues[project]; ok {
		return q
	}
	if r.cfg.DefaultTriageQueueID != "" {
		return r.cfg.DefaultTriageQueueID
	}
	return derivedTriageQueueID(project)
}

// derivedTriageQueueID returns a stable "trq_" ID for a project's triage
// queue: 22 base62 characters of the SHA-256 of the project name.
func derivedTriageQueueID(project string) string {
	sum := sha256.Sum256([]byte("lifecycle triage queue\x00" + project))
	s := new(big.Int).SetBytes(sum[:]).Text(62)
	return "trq_" + s[:22]
}

// marshalReason encodes a Routing's Reason for storage.
func marshalReason(reason any) (json.RawMessage, error) {
	if reason == nil {
		return nil, nil
	}
	if raw, ok := reason.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(reason)
	if err != nil {
		return nil, fmt.Errorf("encode routing reason: %w", err)
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("routing reason must encode as a JSON object, got %.40s", b)
	}
	return b, nil
}
