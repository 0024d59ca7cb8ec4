package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// The Go checks of each tool's arguments refuse whatever its schema
// refuses, and take what it takes.
func TestChecksAgreeWithSchemas(t *testing.T) {
	a := apitest.New(t, apitest.Options{})
	h, err := NewHandler(a.Svc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("a", 40)
	valid := map[string][]string{
		"list_tasks":           {`{}`, `{"status":["todo","done"],"limit":200,"project":"web","cursor":"x"}`, `{"ready":true}`},
		"get_task":             {`{"taskId":"tsk_1"}`, `{"taskId":"tsk_1","tokenBudget":"standard"}`},
		"start_task":           {`{"taskId":"tsk_1","idempotencyKey":"abcdefgh"}`},
		"submit_work":          {`{"taskId":"tsk_1","summary":"s","mode":"artifact","checks":[{"name":"u","status":"passed"}],"pullRequest":{"title":"t","reviewers":["x"]}}`},
		"get_ci_status":        {`{"taskId":"tsk_1"}`},
		"get_review_feedback":  {`{"taskId":"tsk_1"}`},
		"record_blocker":       {`{"taskId":"tsk_1","reason":"missing_secret","actionRequired":"x","resumeInstructions":"y","sourceRunId":"r"}`},
		"resolve_blocker":      {`{"taskId":"tsk_1","resolution":"done"}`},
		"ship":                 {`{"taskId":"tsk_1","mode":"merge_and_deploy","targetEnvironment":"production","expectedHeadSha":"` + sha + `"}`},
		"get_ship_operation":   {`{"operationId":"shp_1"}`},
		"wait_for_task_change": {`{"taskId":"tsk_1"}`, `{"taskId":"tsk_1","timeoutSeconds":60,"afterSequence":3}`},

		"get_merge_queue_status": {`{"taskId":"tsk_1"}`},
	}
	invalid := map[string][]string{
		"list_tasks":           {`{"status":["nope"]}`, `{"limit":0.5}`, `{"limit":201}`, `{"other":1}`, `{"status":"todo"}`, `{"ready":"true"}`},
		"get_task":             {`{}`, `{"taskId":1}`, `{"taskId":"tsk_1","tokenBudget":"tiny"}`, `[]`},
		"start_task":           {`{"taskId":"tsk_1","idempotencyKey":"short"}`, `{"taskId":"tsk_1","idempotencyKey":"has space in it"}`},
		"submit_work":          {`{"taskId":"tsk_1"}`, `{"taskId":"tsk_1","summary":"s","mode":"other"}`, `{"taskId":"tsk_1","summary":"s","checks":[{"name":"u","status":"green"}]}`, `{"taskId":"tsk_1","summary":"s","pullRequest":{"labels":[]}}`},
		"get_ci_status":        {`{}`},
		"get_review_feedback":  {`{"task":"tsk_1"}`},
		"record_blocker":       {`{"taskId":"tsk_1","reason":"Not A Code","actionRequired":"x"}`, `{"taskId":"tsk_1","reason":"r"}`},
		"resolve_blocker":      {`{"taskId":"tsk_1","resolution":7}`},
		"ship":                 {`{"taskId":"tsk_1","mode":"merge_only","targetEnvironment":"staging","expectedHeadSha":"abc"}`, `{"taskId":"tsk_1","mode":"yolo","targetEnvironment":"staging","expectedHeadSha":"` + sha + `"}`, `{"taskId":"tsk_1","mode":"merge_only","expectedHeadSha":"` + sha + `"}`},
		"get_ship_operation":   {`{}`},
		"wait_for_task_change": {`{"taskId":"tsk_1","timeoutSeconds":0.5}`, `{"taskId":"tsk_1","timeoutSeconds":61}`, `{"taskId":"tsk_1","afterSequence":-1}`},

		"get_merge_queue_status": {`{}`, `{"taskId":"tsk_1","queueId":"mq_1"}`, `{"taskId":7}`},
	}
	for name, tool := range h.toolSet {
		if len(valid[name]) == 0 || len(invalid[name]) == 0 {
			t.Errorf("no cases for %s", name)
		}
		for _, args := range valid[name] {
			var v any
			json.Unmarshal([]byte(args), &v)
			if err := tool.in.Validate(v); err != nil {
				t.Errorf("%s: the schema refuses %s: %v", name, args, err)
			}
			if err := tool.decode(json.RawMessage(args)); err != nil {
				t.Errorf("%s: the check refuses %s: %v", name, args, err)
			}
		}
		for _, args := range invalid[name] {
			var v any
			json.Unmarshal([]byte(args), &v)
			if err := tool.in.Validate(v); err == nil {
				t.Errorf("%s: the schema takes %s", name, args)
			}
			err := tool.decode(json.RawMessage(args))
			var ve *lifecycle.ValidationError
			if err == nil || !isValidation(err, &ve) || len(ve.Fields) == 0 {
				t.Errorf("%s: the check takes %s (%v)", name, args, err)
			}
		}
	}
}

func isValidation(err error, ve **lifecycle.ValidationError) bool {
	v, ok := err.(*lifecycle.ValidationError)
	*ve = v
	return ok
}

// TestGetTaskScanAgreesWithDecoding: the arguments of get_task decode to
// the same values and errors with the scan (getTaskIn.scan) as with
// encoding/json alone.
func TestGetTaskScanAgreesWithDecoding(t *testing.T) {
	t.Parallel()
	for _, args := range []string{
		`{"taskId":"tsk_1"}`,
		`{"taskId":"tsk_1","tokenBudget":"standard"}`,
		` { "tokenBudget" : "compact" , "taskId" : "tsk_1" } `,
		`{"taskId":"tsk_1","taskId":"tsk_2"}`,
		`{"TaskId":"tsk_1"}`,
		`{"taskId":"tsk_\u0031"}`,
		`{"taskId":null}`,
		`{"taskId":1}`,
		`{"taskId":"tsk_1","extra":true}`,
		`{"taskId":"tsk_1","tokenBudget":"huge"}`,
		`{}`,
		`[]`,
		`{"taskId":"tsk_1"} trailing`,
		`{"taskId":"tsk_1"`,
		`null`,
		``,
	} {
		scanned, scanErr := decodeArgs[getTaskIn](json.RawMessage(args))
		plain, plainErr := decodeArgs[plainGetTaskIn](json.RawMessage(args))
		if fmt.Sprint(scanErr) != strings.ReplaceAll(fmt.Sprint(plainErr), "plainGetTaskIn", "getTaskIn") {
			t.Errorf("%s: error %v with the scan, %v without", args, scanErr, plainErr)
			continue
		}
		if scanErr == nil && (scanned.TaskID != plain.TaskID || scanned.TokenBudget != plain.TokenBudget) {
			t.Errorf("%s: %+v with the scan, %+v without", args, *scanned, *plain)
		}
	}
}

// plainGetTaskIn is getTaskIn without its scan: decoded by encoding/json.
type plainGetTaskIn struct {
	TaskID      string `json:"taskId"`
	TokenBudget string `json:"tokenBudget,omitempty"`
}

func (in *plainGetTaskIn) check(c *checker) { (*getTaskIn)(in).check(c) }
