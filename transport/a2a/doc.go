// Package a2a serves Conclave to other agents over A2A v1.0 (JSON-RPC
// binding): the agent card at CardPath and the JSON-RPC endpoint at
// RPCPath, with SendMessage, SendStreamingMessage, GetTask, ListTasks,
// CancelTask and SubscribeToTask.
//
// A2A is a projection of the session hub, never a second pipeline: every
// call reads the run's events through an ordinary engine subscription
// (journal replay, then live) and folds them with a Projector, a pure
// function of the seq-ordered events. Several streams of one task therefore
// see the same frames in the same order.
//
// # Tasks and contexts
//
// A task is one Conclave run: taskId = run_id, contextId = session_id. A
// message without taskId starts a run: its text parts and data parts (the
// card's application/json input mode: the data's compact JSON), joined in
// order with newlines, are the question; its contextId (optional) the
// session; its metadata may carry the run options of POST /api/v1/runs
// (hitl, scenario, seed, concurrency, approval_timeout_seconds,
// approval_timeout_action); its file parts (raw bytes or a url, with
// filename and mediaType; the card's input modes list the types) are
// the run's files (StartRun.Files; a url is fetched only from the
// operator's allowed prefixes; a refused file is -32602 with its code and
// REST's HTTP status, 413 or 422). Without a scenario, the scripted model runs
// DefaultScenario: the engine's default at 15 ms per token, so a task is
// WORKING for a few seconds, as a real council would be, rather than done
// before a client can look.
// A message with taskId answers the task's open interrupts: data parts
// (ResumeData: {interruptId, decision, feedback, editedArgs, response,
// plan, reason, choices}), one per interrupt, or text, which answers the oldest
// open interrupt, the first one the INPUT_REQUIRED status lists
// ("approve", "reject", "reject: <feedback>", the answer to a question,
// or the number, id or label of a choice's option: several, separated by
// commas, for a multiple choice). A choice's data part lists its options
// and a responseSchema enumerating their ids. Every answer is validated
// before any is applied.
//
// # Mapping (Projector.Apply)
//
// Progress reports are statusUpdate frames in TASK_STATE_WORKING whose
// message (ROLE_AGENT, one text part) carries metadata
// {"conclave":{"seq","event","lane","agentId"}}; artifact frames carry the
// same metadata on the event. Every text_delta of a node, sub-agent or the
// synthesiser is one artifact chunk: coalescing by subscription batch would
// make two streams of one task differ, so the stream instead writes all
// frames of a batch in one write.
//
//	event                  frames
//	run_started            status WORKING "Council started: <question>"
//	planning_started       status WORKING
//	plan_proposed          status WORKING "Plan proposed: N nodes in W waves"
//	planning_failed        status WORKING (run_error follows)
//	plan_approved/rejected status WORKING
//	replan_attempt         status WORKING "Re-planning (attempt i of n)"
//	node_compacting        status WORKING "<node>: compacting its output"
//	debate_round_restarted status WORKING "Debate <d>: round r starts again (attempt a): <reason>"
//	wave_started/completed status WORKING
//	node_started           status WORKING "<node> started: <goal>"
//	text_delta             artifact chunk, artifactId = lane ("node:n001", "node:n001/sub:sub1"),
//	                       "answer" for the synthesiser; the first chunk creates it (append false),
//	                       the next append; director text (the plan JSON) is dropped
//	node_completed         artifact replaced by the node's output, lastChunk
//	node_failed/cancelled  empty lastChunk closing the lane's artifact (if open) + status WORKING
//	node_skipped           status WORKING
//	tool_call_started/…    status WORKING "<agent> called <tool>", "<agent>: <tool> returned|failed"
//	tool_call_progress     status WORKING "<agent>: <tool> 40/100 <message>" (no "/100" without a total)
//	turn_started,          nothing
//	request_received
//	agent_restarted        artifact emptied (append false) + status WORKING
//	remote_task            status WORKING "<node>: remote agent <a>, task <id>: <state>[: <text>]"
//	warning                status WORKING
//	subagent_started       status WORKING
//	subagent_finished      ok: artifact replaced by its output, lastChunk; else as node_failed
//	synthesis_started      status WORKING
//	synthesis_completed    artifact "answer" replaced by the answer, lastChunk
//	synthesis_failed       as node_failed
//	interrupt_raised       status INPUT_REQUIRED: for each open interrupt a text prompt and a
//	                       data part (InterruptData); the stream ends
//	interrupt_resolved/    status WORKING once none is open (INPUT_REQUIRED restated with the
//	interrupt_expired      ones left otherwise)
//	run_finished           (artifact "answer" if not final yet) + status COMPLETED, text = answer
//	run_error              status CANCELED (aborted), REJECTED (plan_rejected), FAILED (others)
//	reasoning_delta,       nothing
//	node_progress,
//	synthesis_progress,
//	token_usage
//
// While the task is INPUT_REQUIRED, progress is not reported (the status
// keeps saying what input is needed, and every stream has closed); the
// other lanes' artifacts keep growing and appear in the next snapshot.
//
// # Streams
//
// A stream (SSE, "data: <JSON-RPC response>\n\n", ": ping" heartbeats)
// starts with {"task": Task}: for a new task the submitted task, for an
// answer the task once the answered interrupts are settled, for
// SubscribeToTask the task as it is now. Then the frames of later events,
// until a terminal state or TASK_STATE_INPUT_REQUIRED; then it ends.
//
// # Errors
//
// JSON-RPC errors are HTTP 200 (internal errors 500), with a
// google.rpc.ErrorInfo in data for A2A's codes: -32700 body not JSON,
// -32600 not a JSON-RPC request (or body too large), -32601 unknown method,
// -32602 invalid params (including a contextId that does not match the
// task, and an invalid answer), -32001 unknown task (or another tenant's),
// -32002 CancelTask on a terminal task, -32003 push notifications, -32004
// a message to a terminal task or to a task not waiting for input, and
// SubscribeToTask on a terminal task, -32005 a Content-Type other than
// JSON or a raw or url part in an answer, -32007 GetExtendedAgentCard,
// -32009 an A2A-Version other than 1.0 (no header means 0.3). A failed
// authentication is HTTP 401. Refusals that carry their own HTTP status,
// the same REST and AG-UI answer: a tenant's quota (too many runs, the
// run rate, too many streams) is HTTP 429 with Retry-After and
// CodeQuotaExceeded (-32050, from JSON-RPC's server-defined range: A2A
// 1.0 gives back-pressure no code), whose ErrorInfo has domain
// "conclave.quota", the quota's code as reason (TOO_MANY_RUNS,
// RATE_LIMITED, TOO_MANY_STREAMS) and metadata retry_after_seconds; a
// scenario too large for the event budget is HTTP 422 with -32602 (it
// never fits: retrying does not help); a cluster node that cannot reach
// its journal, and a server shutting down, are HTTP 503 with -32603.
// Unrecognized fields of the params and of the message are ignored (spec
// §5.7; logged at debug level); Conclave's own run options in the message
// metadata are checked strictly, so a misspelt option is -32602. The agent
// card is served with Cache-Control max-age=300 and an ETag (§8.6.1), and
// answers If-None-Match with 304. An error after a stream has begun is a final
// "event: error" frame. An error of a streaming call (SendStreamingMessage,
// SubscribeToTask) before its stream begins (an unknown or terminal task,
// invalid params) is a plain JSON-RPC error response, HTTP 200, not an SSE
// stream: what the reference server (@a2a-js/sdk) does, and what the
// official TCK reads (its streaming client takes any text/event-stream
// answer for a successful stream; STREAM-SUB-003/004 fail on an SSE error
// frame). The official client accepts both, and gives the typed error only
// for this one.
package a2a
