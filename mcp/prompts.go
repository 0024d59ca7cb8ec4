package mcp

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// addPrompts registers the work_on_task prompt.
func (h *Handler) addPrompts(server *sdk.Server) {
	server.AddPrompt(&sdk.Prompt{
		Name:  "work_on_task",
		Title: "Work on a task",
		Description: "An agent's whole loop on one task: read it, start it, do the work, submit it, watch review " +
			"and CI, rework when changes are requested, and ship.",
		Arguments: []*sdk.PromptArgument{{Name: "taskId", Title: "Task ID", Required: true,
			Description: "the task's ID (tsk_...), from list_tasks or the task's links"}},
	}, h.workOnTask)
}

// workOnTask answers the work_on_task prompt: the loop, with the task
// embedded as it is now.
func (h *Handler) workOnTask(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	id := req.Params.Arguments["taskId"]
	if id == "" {
		return nil, h.rpcError(ctx, "prompt work_on_task", invalidArgument("taskId", "is required: the task's ID, tsk_..."))
	}
	res, err := h.readResource(ctx, &sdk.ReadResourceRequest{Session: req.Session, Params: &sdk.ReadResourceParams{URI: kindTask.uri(id)}, Extra: req.Extra})
	if err != nil {
		return nil, err
	}
	return &sdk.GetPromptResult{
		Description: "Work on task " + id + " from start to ship",
		Messages: []*sdk.PromptMessage{
			{Role: "user", Content: &sdk.EmbeddedResource{Resource: res.Contents[0]}},
			{Role: "user", Content: &sdk.TextContent{Text: fmt.Sprintf(workLoop, id)}},
		},
	}, nil
}

// workLoop is the prompt's text; %[1]s is the task's ID.
const workLoop = `Work on task %[1]s (shown above) until it is shipped, using the lifecycle tools. Every answer about the task lists availableActions: the only next steps the server accepts. Follow them; never guess.

1. Read the task with get_task (taskId %[1]s): title, acceptanceCriteria and context say what is asked.
2. If availableActions has "start", call start_task. If the task's waitingOn is not empty, it depends on tasks not done yet: wait for them (wait_for_task_change announces when waitingOn changes), or pick another task with list_tasks and ready: true.
3. Do the work on the task's branch, then call submit_work with a summary of what you did and the checks you ran.
4. Watch review and CI: call wait_for_task_change (taskId %[1]s, and afterSequence = the sequence of the last event you saw), again after each answer or timeout, and read get_ci_status and get_review_feedback when an event concerns them.
   - CI failed: fix it, then submit_work again when "submit" is offered.
   - Review decision changes_requested: read every review with get_review_feedback, call start_task (it is offered for rework), fix what was asked, and submit_work again.
5. When availableActions has "ship", call ship with expectedHeadSha set to the task's headSha, mode merge_only unless you were asked to deploy, and targetEnvironment staging unless told otherwise. Follow the operation with get_ship_operation (or wait_for_task_change) until it succeeded or failed; a failed ship's error says which precondition failed. While the operation waits with reason merge_queue, get_merge_queue_status says where the change is in the queue; if the queue sends it back (error.code merge_conflict or checks_failed), call start_task, fix it (rebase on the base branch, or fix the failed checks it lists) and submit_work again.
6. If you cannot go on without a person (a secret, an access, a decision), call record_blocker with exactly what is needed in actionRequired, and wait for the task to change.

Mutating tools are safe to retry with the same arguments: a retry answers as the first call did and acts once. An error answer carries error.code, error.message and, on a conflict, error.details.availableActions: read them and take one of those actions.`
