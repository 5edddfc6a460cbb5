// Package agui serves Conclave runs to AG-UI front ends (CopilotKit's
// HttpAgent and any other @ag-ui/client 1.0 consumer): POST /api/v1/agui
// takes a RunAgentInput and answers with an SSE stream of AG-UI events.
//
// # One source of events
//
// AG-UI is a projection of the session hub, not a second pipeline: the
// handler subscribes to the run's session exactly as the SSE and WebSocket
// streams do (actors.Engine.Subscribe, replay from the journal then live)
// and a pure Projector maps each envelope of the run, in seq order, to AG-UI
// events. Events of other runs of the session are skipped.
//
// # Identifiers
//
//   - threadId is the Conclave session id (it must be a valid session id);
//     a run started from AG-UI runs in that session.
//   - runId is the client's; the Conclave run id travels in RUN_STARTED's
//     metadata: {"conclave":{"runId","sessionId","after"}} (after: the seq the
//     AG-UI run starts after).
//   - subagentRunId = "<run id>/<lane stream id>" (e.g. ".../node:n003",
//     ".../node:n003/sub:sub1", ".../director"): one lane per invocation, the
//     same in every AG-UI run of the Conclave run.
//   - messageId = "<run id>/m<k>"; toolCallId = "<run id>/<stream>#<call id>";
//     a tool result's messageId is its toolCallId + "/result".
//
// # Mapping (Conclave event → AG-UI events)
//
//	run_started          CUSTOM conclave.run_started {question,hitl,scenario} (RUN_STARTED opens every AG-UI run)
//	planning_started     SUBAGENT_STARTED{name:"director"}
//	plan_proposed        close director messages, SUBAGENT_FINISHED{success}; STATE_SNAPSHOT (the plan)
//	planning_failed      SUBAGENT_ERROR{code:"planning_failed"}
//	plan_approved        STATE_DELTA /status=running (STATE_SNAPSHOT for an edited plan); CUSTOM
//	plan_rejected        CUSTOM
//	replan_attempt       CUSTOM (the re-plan's planning_started opens its director again)
//	wave_started         STEP_STARTED{"wave <i>"}; STATE_DELTA /wave
//	wave_completed       STEP_FINISHED{"wave <i>"}
//	node_started         SUBAGENT_STARTED{name:<node id>, description:<goal>}; STATE_DELTA node status running
//	node_completed       close lane messages; SUBAGENT_FINISHED{success, result:<output>}; STATE_DELTA completed
//	node_failed          close lane messages; SUBAGENT_ERROR{code:"node_failed"}; STATE_DELTA failed
//	node_cancelled       close lane messages; SUBAGENT_ERROR{code:"cancelled"}; STATE_DELTA cancelled
//	node_skipped         STATE_DELTA skipped; CUSTOM
//	subagent_started     SUBAGENT_STARTED{parentSubagentRunId, parentToolCallId:<the delegate call>}
//	subagent_finished    ok: SUBAGENT_FINISHED{success, result}; failed/cancelled: SUBAGENT_ERROR{code}
//	synthesis_started    STATE_DELTA /status=synthesizing (the synthesiser speaks as the top-level agent)
//	synthesis_completed  TEXT_MESSAGE_END
//	synthesis_failed     TEXT_MESSAGE_END; CUSTOM
//	text_delta           TEXT_MESSAGE_START (first delta of a message) + TEXT_MESSAGE_CONTENT
//	reasoning_delta      REASONING_START + REASONING_MESSAGE_START (first) + REASONING_MESSAGE_CONTENT
//	tool_call_started    close lane messages; TOOL_CALL_START{parentMessageId} + TOOL_CALL_ARGS + TOOL_CALL_END
//	                     (the model's request, as in an AG-UI assistant message: not that it runs; see below)
//	tool_call_finished   TOOL_CALL_RESULT{role:"tool"} (metadata.conclave.isError on errors)
//	tool_call_progress   CUSTOM conclave.tool_call_progress {call_id,tool,progress,total,message,toolCallId}
//	                     (AG-UI 1.0 has no tool progress event; toolCallId is the TOOL_CALL_START's)
//	token_usage, warning, agent_restarted,  CUSTOM (agent_restarted first closes the lane's messages)
//	turn_started, request_received
//	node_progress, synthesis_progress,      CUSTOM
//	node_compacting
//	remote_task          CUSTOM (a remote A2A agent's task on its node's lane: id, state, status text)
//	interrupt_raised     CUSTOM; the lane is parked (node_approval: STATE_DELTA awaiting_approval)
//	interrupt_resolved, interrupt_expired   CUSTOM
//	run_finished         STATE_DELTA /status; RUN_FINISHED{outcome:success, result:{answer,nodes,durationMs}, usage}
//	run_error            STATE_DELTA /status; RUN_ERROR{code:<our code: aborted, node_failed, interrupted, …>}
//
// Every event of a lane carries its subagentRunId; the run lane and the
// synthesiser carry none. A lane's text opens a message at its first delta
// and closes it at its next reasoning, tool call, restart or lane end, so
// parallel nodes interleave freely with distinct message ids. Events of
// types this package does not know become CUSTOM. The agent state is the
// task graph (see Graph), kept by STATE_SNAPSHOT and STATE_DELTA.
// MESSAGES_SNAPSHOT is never sent: the projection keeps no message text, and
// a partial snapshot would delete the client's messages.
//
// # Interrupts and resume
//
// A Conclave interrupt parks one agent while the others go on; AG-UI ends
// the whole run instead. The policy: once the run has an open interrupt,
// its AG-UI run ends with RUN_FINISHED{outcome:interrupt} as soon as
//
//   - every open lane is parked or waits for its open children, and the
//     run has been quiet for Config.Settle (100 ms: the run supervisor may
//     be about to start another node), or
//   - the oldest open interrupt has waited Config.MaxHold (2 s) while other
//     agents kept working: then they are reported suspended too.
//
// A tool call that needs a human's approval is announced like any other
// (TOOL_CALL_START, ARGS, END: the model asked for it; its
// tool_call_started is marked awaits_approval), and the interrupt of
// reason tool_call names its toolCallId: that is AG-UI's shape of a tool
// call awaiting approval. It has run only once TOOL_CALL_RESULT arrives;
// a refused call's result is an error (metadata.conclave.isError).
//
// Only interrupts still pending in the registry are reported. Before the
// terminal event every text message, reasoning span and wave step is
// closed, every open lane ends with SUBAGENT_FINISHED{outcome:{type:
// "suspended", interruptIds}} (interruptIds: those it is parked on), and a
// STATE_SNAPSHOT is sent. Interrupts map to reasons tool_call (tool
// approvals, with toolCallId), input_required (info requests, with a
// responseSchema {response}; choices, with toolCallId, a message numbering
// the options and a responseSchema {choices: [ids]} whose items list each
// option as {const: id, title: label}), conclave:plan_approval and confirmation
// (node approvals); each has its expiresAt and its Conclave payload under
// metadata.conclave.
//
// Agents keep working after the AG-UI run ended; their events wait in the
// journal. The resume is a new POST on the same thread with resume[]
// answering every reported interrupt (see ResumeFor for the payloads). The
// handler answers them (Engine.Resume), then streams the same Conclave run
// from the seq after the one where the interrupted AG-UI run stopped, as a
// new AG-UI run (parentRunId: the interrupted one): RUN_STARTED, a
// STATE_SNAPSHOT, the open wave's STEP_STARTED and a SUBAGENT_STARTED for
// each open lane (same subagentRunId: the same invocation continues), then
// the events in order: a tool-bound interrupt continues with only
// TOOL_CALL_RESULT for its original toolCallId. Interrupts raised after the
// cut are reported by that next AG-UI run.
//
// Refused in-band with a lone RUN_ERROR: new input while the thread has
// pending interrupts (code pending_interrupts); a resume that misses an
// open interrupt, names unknown ones or answers them differently a second
// time (invalid_resume); a resolved answer to an interrupt that expired
// (interrupt_expired; answer it "cancelled" to see the rest of the run).
// A replay of a resume (same runId, same entries) answers nothing twice
// and streams the same continuation, ending where the first one ended.
// The suspended state (cursor and projection) is held in memory for
// ResumeGrace after the last interrupt expires; a resume the handler holds
// no state for (evicted, or lost in a restart while the engine kept the run
// parked) is rebuilt by projecting the run from the journal up to the last
// of the answered interrupts, at the price of repeating what the
// interrupted AG-UI run showed after them.
//
// Abort (POST /api/v1/runs/{id}/abort) ends the AG-UI run with
// RUN_ERROR{code:"aborted"}, as every run_error maps to RUN_ERROR.
//
// # Run options
//
// RunAgentInput.forwardedProps may carry hitl, scenario, seed, concurrency,
// approval_timeout_seconds and approval_timeout_action with the meaning
// they have in POST /api/v1/runs, and question (used when messages hold no
// user message; otherwise the question is the last user message's text).
// Other forwardedProps keys, tools, context and state are ignored.
//
// # Files
//
// The media parts of the question's user message are the run's files
// (StartRun.Files): AG-UI 1.0's image, audio, video and document parts
// with a data source (base64) or a url source (fetched by the engine
// from the operator's allowed prefixes only), and the pre-1.0 draft's
// binary parts (mimeType, data or url, filename). A file is named by
// metadata.filename (binary: filename), else the part's id, else
// "<type>-<index>". A part with a provider's file handle (source file, or
// a binary part with only an id) is refused, 422 file_invalid: no bytes
// travel with it. The engine checks the files as any run's (sizes,
// types: docs/api.md); CUSTOM conclave.run_started does not carry them.
package agui
