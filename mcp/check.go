package mcp

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/idemkey"
)

// The arguments of each tool are checked in Go against what their schema
// says (check_test.go holds the two to each other): the schemas tell
// clients, the checks answer a model's mistakes member by member, at a
// fraction of a schema validator's cost.

// checker collects what is wrong with a call's arguments.
type checker struct{ fields []lifecycle.FieldError }

func (c *checker) add(field, reason string) {
	c.fields = append(c.fields, lifecycle.FieldError{Field: field, Reason: reason})
}

func (c *checker) required(field, v string) {
	if v == "" {
		c.add(field, "is required")
	}
}

func (c *checker) oneOf(field, v string, allowEmpty bool, values ...any) {
	if (v == "" && allowEmpty) || slices.Contains(values, any(v)) {
		return
	}
	c.add(field, fmt.Sprintf("must be one of %v", values))
}

func (c *checker) between(field string, v, lo, hi int64, allowZero bool) {
	if (v == 0 && allowZero) || (v >= lo && v <= hi) {
		return
	}
	c.add(field, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
}

func (c *checker) match(field, v string, re *regexp.Regexp, what string) {
	if v != "" && !re.MatchString(v) {
		c.add(field, "must be "+what)
	}
}

func (c *checker) key(v string) {
	if v == "" {
		return
	}
	if reason := idemkey.Check(v); reason != "" {
		c.add("idempotencyKey", reason)
	}
}

func (c *checker) err() error {
	if len(c.fields) == 0 {
		return nil
	}
	return &lifecycle.ValidationError{Fields: c.fields}
}

// checked is the arguments of a tool, which can say what is wrong with
// them.
type checked interface{ check(c *checker) }

var (
	reasonRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	shaRE    = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)
)

func (in *listTasksIn) check(c *checker) {
	for _, st := range in.Status {
		c.oneOf("status", string(st), false, statusValues...)
	}
	c.between("limit", int64(in.Limit), 1, 200, true)
}

func (in *getTaskIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.oneOf("tokenBudget", in.TokenBudget, true, "compact", "standard")
}

func (in *taskIDIn) check(c *checker) { c.required("taskId", in.TaskID) }

func (in *startTaskIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.key(in.IdempotencyKey)
}

func (in *submitWorkIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.required("summary", in.Summary)
	c.oneOf("mode", string(in.Mode), true, "adapter_managed", "artifact")
	for i, ch := range in.Checks {
		c.required(fmt.Sprintf("checks[%d].name", i), ch.Name)
		c.oneOf(fmt.Sprintf("checks[%d].status", i), string(ch.Status), false, "passed", "failed", "running", "skipped")
	}
	c.key(in.IdempotencyKey)
}

func (in *recordBlockerIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.required("reason", in.Reason)
	c.match("reason", in.Reason, reasonRE, "a code of lower-case letters, digits, '_', '.' or '-'")
	c.required("actionRequired", in.ActionRequired)
	c.key(in.IdempotencyKey)
}

func (in *resolveBlockerIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.key(in.IdempotencyKey)
}

func (in *shipIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.oneOf("mode", string(in.Mode), false, "merge_only", "merge_and_deploy")
	c.oneOf("targetEnvironment", string(in.TargetEnvironment), false, "staging", "production")
	c.required("expectedHeadSha", in.ExpectedHeadSHA)
	c.match("expectedHeadSha", in.ExpectedHeadSHA, shaRE, "a full 40-character hex commit SHA")
	c.key(in.IdempotencyKey)
}

func (in *shipOperationIn) check(c *checker) { c.required("operationId", in.OperationID) }

func (in *waitIn) check(c *checker) {
	c.required("taskId", in.TaskID)
	c.between("timeoutSeconds", int64(in.TimeoutSeconds), 1, maxWaitSeconds, true)
	if in.AfterSequence != nil && *in.AfterSequence < 0 {
		c.add("afterSequence", "must not be negative")
	}
}
